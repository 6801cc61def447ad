//! Placing text labels beside the points they name so that no two labels overlap.
//!
//! Each label, in turn, tries positions around its point, nearest first: right, left,
//! above and below it, then stacked further up and down on either side, then in columns
//! further out. It takes the first position inside the plot that overlaps no label
//! already placed and no point's marker; failing that, the first that overlaps only
//! markers. A label with no free position at all goes into an overflow column beside
//! the plot. A label not right next to its point is joined to it by a leader line.
//!
//! Boxes are estimated ([`super::svg::text_width`] errs wide), so a browser's text fits
//! inside them.

/// An axis-aligned box, in SVG pixels (y grows downwards).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

impl Rect {
    /// Whether the two boxes share any area (touching edges do not count).
    pub fn intersects(&self, other: &Rect) -> bool {
        self.x < other.x + other.w
            && other.x < self.x + self.w
            && self.y < other.y + other.h
            && other.y < self.y + self.h
    }

    fn inside(&self, bounds: &Rect) -> bool {
        self.x >= bounds.x
            && self.y >= bounds.y
            && self.x + self.w <= bounds.x + bounds.w
            && self.y + self.h <= bounds.y + bounds.h
    }

    fn centre(&self) -> (f64, f64) {
        (self.x + self.w / 2.0, self.y + self.h / 2.0)
    }

    /// The point of the box nearest to `(x, y)` (where a leader line ends).
    pub fn nearest_point(&self, x: f64, y: f64) -> (f64, f64) {
        (
            x.clamp(self.x, self.x + self.w),
            y.clamp(self.y, self.y + self.h),
        )
    }
}

/// A label to place: the point it names and the size of its text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Label {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

/// Where a label went.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Placed {
    pub rect: Rect,
    /// Not right next to its point: draw a line from the point to the label.
    pub leader: bool,
}

/// Space between a point and a label right next to it.
const GAP: f64 = 7.0;

/// The positions a label of `w` × `h` may take around `(x, y)`, nearest first, each
/// with whether it is right next to the point.
fn candidates(x: f64, y: f64, w: f64, h: f64, bounds: &Rect) -> Vec<(Rect, bool)> {
    let mut out = vec![
        (
            Rect {
                x: x + GAP,
                y: y - h / 2.0,
                w,
                h,
            },
            true,
        ),
        (
            Rect {
                x: x - GAP - w,
                y: y - h / 2.0,
                w,
                h,
            },
            true,
        ),
        (
            Rect {
                x: x - w / 2.0,
                y: y - GAP - h,
                w,
                h,
            },
            true,
        ),
        (
            Rect {
                x: x - w / 2.0,
                y: y + GAP,
                w,
                h,
            },
            true,
        ),
    ];
    let step = h + 2.0;
    let rows = (bounds.h / step).ceil() as i32 + 1;
    let columns = (bounds.w / (w + GAP)).ceil() as i32 + 1;
    let mut far = Vec::new();
    for column in 0..columns {
        let dx = GAP + f64::from(column) * (w + GAP);
        for row in 0..=rows {
            for sign in [-1.0, 1.0] {
                if row == 0 && sign > 0.0 {
                    continue;
                }
                let top = y - h / 2.0 + sign * f64::from(row) * step;
                for rect in [
                    Rect {
                        x: x + dx,
                        y: top,
                        w,
                        h,
                    },
                    Rect {
                        x: x - dx - w,
                        y: top,
                        w,
                        h,
                    },
                ] {
                    far.push((rect, false));
                }
            }
        }
    }
    let distance = |r: &Rect| {
        let (cx, cy) = r.centre();
        (cx - x).powi(2) + (cy - y).powi(2)
    };
    far.sort_by(|a, b| distance(&a.0).total_cmp(&distance(&b.0)));
    out.extend(far);
    out
}

/// Place `labels` inside `bounds`, keeping clear of `obstacles` (the markers) where
/// possible; labels that find no room are stacked from the top of a column whose left
/// edge is `overflow_x` (outside `bounds`). No two returned boxes intersect.
pub fn place(labels: &[Label], bounds: Rect, obstacles: &[Rect], overflow_x: f64) -> Vec<Placed> {
    let mut placed: Vec<Placed> = Vec::with_capacity(labels.len());
    let mut overflow_y = bounds.y;
    for label in labels {
        let options = candidates(label.x, label.y, label.width, label.height, &bounds);
        let free = |rect: &Rect, placed: &[Placed]| {
            rect.inside(&bounds) && !placed.iter().any(|p| p.rect.intersects(rect))
        };
        let clear = options
            .iter()
            .find(|(r, _)| free(r, &placed) && !obstacles.iter().any(|o| o.intersects(r)));
        let chosen = clear.or_else(|| options.iter().find(|(r, _)| free(r, &placed)));
        let next = match chosen {
            Some((rect, near)) => Placed {
                rect: *rect,
                leader: !near,
            },
            None => {
                let rect = Rect {
                    x: overflow_x,
                    y: overflow_y,
                    w: label.width,
                    h: label.height,
                };
                overflow_y += label.height + 2.0;
                Placed { rect, leader: true }
            }
        };
        placed.push(next);
    }
    placed
}

/// Whether any two of `boxes` intersect (for tests of every chart's layout).
pub fn any_overlap(boxes: &[Rect]) -> Option<(usize, usize)> {
    for i in 0..boxes.len() {
        for j in i + 1..boxes.len() {
            if boxes[i].intersects(&boxes[j]) {
                return Some((i, j));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLOT: Rect = Rect {
        x: 80.0,
        y: 50.0,
        w: 450.0,
        h: 340.0,
    };

    fn label(x: f64, y: f64, chars: usize) -> Label {
        Label {
            x,
            y,
            width: 7.0 * chars as f64,
            height: 13.0,
        }
    }

    fn boxes(placed: &[Placed]) -> Vec<Rect> {
        placed.iter().map(|p| p.rect).collect()
    }

    #[test]
    fn a_lone_label_sits_right_of_its_point_without_a_leader() {
        let placed = place(&[label(200.0, 200.0, 8)], PLOT, &[], 600.0);
        assert_eq!(placed[0].rect.x, 207.0);
        assert!(!placed[0].leader);
        // Near the right edge it goes left of the point.
        let placed = place(&[label(520.0, 200.0, 8)], PLOT, &[], 600.0);
        assert!(placed[0].rect.x + placed[0].rect.w <= 520.0 - GAP);
    }

    #[test]
    fn labels_of_points_on_one_spot_never_overlap() {
        // Five configurations at 0% stale with nearly the same req/s (run
        // 20261201-010445), and three more near them.
        let mut labels: Vec<Label> = (0..5)
            .map(|i| label(PLOT.x + 12.0, 210.0 + i as f64, 10 + i))
            .collect();
        labels.push(label(PLOT.x + 12.0, 150.0, 18));
        labels.push(label(300.0, 160.0, 15));
        labels.push(label(305.0, 162.0, 15));
        let markers: Vec<Rect> = labels
            .iter()
            .map(|l| Rect {
                x: l.x - 5.0,
                y: l.y - 5.0,
                w: 10.0,
                h: 10.0,
            })
            .collect();
        let placed = place(&labels, PLOT, &markers, 600.0);
        assert_eq!(any_overlap(&boxes(&placed)), None, "{placed:?}");
        for (p, m) in placed.iter().zip(&markers) {
            assert!(p.rect.inside(&PLOT), "{p:?}");
            assert!(!p.rect.intersects(m), "a label covers its own point: {p:?}");
        }
        assert!(
            placed.iter().any(|p| p.leader),
            "stacked labels have leaders"
        );
    }

    #[test]
    fn labels_that_do_not_fit_go_to_the_overflow_column_without_overlapping() {
        // Far more labels than the plot can hold.
        let small = Rect {
            x: 0.0,
            y: 0.0,
            w: 120.0,
            h: 60.0,
        };
        let labels: Vec<Label> = (0..40).map(|i| label(60.0, 30.0, 5 + i % 7)).collect();
        let placed = place(&labels, small, &[], 200.0);
        assert_eq!(any_overlap(&boxes(&placed)), None);
        let overflowed: Vec<&Placed> = placed.iter().filter(|p| p.rect.x == 200.0).collect();
        assert!(!overflowed.is_empty() && overflowed.iter().all(|p| p.leader));
        assert!(placed.iter().filter(|p| p.rect.inside(&small)).count() >= 4);
    }

    #[test]
    fn random_layouts_never_overlap() {
        // A fixed pseudo-random sequence: points anywhere in the plot, in clusters.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 10_000) as f64 / 10_000.0
        };
        for _ in 0..200 {
            let n = 1 + (next() * 20.0) as usize;
            let (cx, cy) = (PLOT.x + next() * PLOT.w, PLOT.y + next() * PLOT.h);
            let labels: Vec<Label> = (0..n)
                .map(|_| {
                    label(
                        (cx + (next() - 0.5) * 40.0).clamp(PLOT.x, PLOT.x + PLOT.w),
                        (cy + (next() - 0.5) * 40.0).clamp(PLOT.y, PLOT.y + PLOT.h),
                        3 + (next() * 16.0) as usize,
                    )
                })
                .collect();
            let placed = place(&labels, PLOT, &[], 600.0);
            assert_eq!(any_overlap(&boxes(&placed)), None, "{labels:?}");
        }
    }

    #[test]
    fn leader_lines_end_on_the_box() {
        let r = Rect {
            x: 10.0,
            y: 10.0,
            w: 20.0,
            h: 10.0,
        };
        assert_eq!(r.nearest_point(0.0, 15.0), (10.0, 15.0));
        assert_eq!(r.nearest_point(50.0, 50.0), (30.0, 20.0));
        assert!(!r.intersects(&Rect {
            x: 30.0,
            y: 10.0,
            w: 5.0,
            h: 5.0
        }));
    }
}
