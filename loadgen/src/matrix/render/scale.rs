//! Axis scales for the charts: linear from zero up to a round ceiling, and logarithmic
//! by decades with zero drawn apart, for figures whose interesting values are far apart
//! in size — stale-read fractions, where 0.1% and 1% must not share a pixel while 0%
//! (the common case) keeps its own place, and latencies that span decades.
//!
//! A [`Scale`] maps a value to a fraction of the axis (0 at the origin, 1 at the far
//! end) and names its ticks; [`super::frame::Frame`] turns fractions into pixels.

use super::svg::tick_label;

/// On a log scale that shows zero: where zero sits, and where the first decade starts
/// (fractions of the axis). The gap between them is drawn as a break in the axis.
pub const ZERO_AT: f64 = 0.03;
pub const LOG_FROM: f64 = 0.13;

/// Positive values spanning at least this ratio (largest / smallest) get a log scale
/// from [`Scale::auto`].
pub const SPAN_FOR_LOG: f64 = 30.0;

/// A linear axis is cut into this many intervals at most, and half as many at least.
const MOST_INTERVALS: f64 = 6.0;

/// A round tick step: 1, 2, 2.5 or 5 times a power of ten, at or above `value`.
pub fn nice_step(value: f64) -> f64 {
    if value <= 0.0 || !value.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|c| *c >= value * (1.0 - 1e-12))
        .unwrap_or(10.0 * magnitude)
}

/// How values are laid along an axis.
#[derive(Debug, Clone, PartialEq)]
pub enum Scale {
    /// From 0 to `max`, a multiple of the tick step `step`.
    Linear { max: f64, step: f64 },
    /// Decades 10^`lo_exp` to 10^`hi_exp`; with `zero`, 0 is drawn apart before them.
    Log {
        lo_exp: i32,
        hi_exp: i32,
        zero: bool,
    },
}

/// A tick of an axis: where, what it reads, and whether it is a major one (a decade, or
/// every tick of a linear axis).
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    pub value: f64,
    pub label: String,
    pub major: bool,
}

fn finite(values: impl IntoIterator<Item = f64>) -> Vec<f64> {
    values.into_iter().filter(|v| v.is_finite()).collect()
}

impl Scale {
    /// Linear from zero to the first round tick 2% or more above the largest value,
    /// with three to six intervals of a round step.
    pub fn linear(values: impl IntoIterator<Item = f64>) -> Scale {
        let most = finite(values).into_iter().fold(0.0, f64::max) * 1.02;
        if most <= 0.0 {
            return Scale::Linear {
                max: 1.0,
                step: 0.2,
            };
        }
        let step = nice_step(most / MOST_INTERVALS);
        Scale::Linear {
            max: step * (most / step).ceil(),
            step,
        }
    }

    /// Logarithmic over the decades that hold the positive values; zero (or a negative
    /// value) among them is drawn apart. Without positive values: the decade 0.1–1.
    pub fn log(values: impl IntoIterator<Item = f64>) -> Scale {
        let values = finite(values);
        let zero = values.iter().any(|v| *v <= 0.0);
        let positive: Vec<f64> = values.into_iter().filter(|v| *v > 0.0).collect();
        let (lo, hi) = positive
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
                (lo.min(*v), hi.max(*v))
            });
        if positive.is_empty() {
            return Scale::Log {
                lo_exp: -1,
                hi_exp: 0,
                zero,
            };
        }
        let lo_exp = lo.log10().floor() as i32;
        // A value just above a power of ten (1.0000001) stays in the decade below it.
        let hi_exp = ((hi.log10() - 1e-9).ceil() as i32).max(lo_exp + 1);
        Scale::Log {
            lo_exp,
            hi_exp,
            zero,
        }
    }

    /// Log when the positive values span [`SPAN_FOR_LOG`] or more, linear otherwise.
    pub fn auto(values: impl IntoIterator<Item = f64>) -> Scale {
        let values = finite(values);
        let positive = values.iter().copied().filter(|v| *v > 0.0);
        let (lo, hi) = positive.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
        if hi > 0.0 && hi / lo >= SPAN_FOR_LOG {
            Scale::log(values)
        } else {
            Scale::linear(values)
        }
    }

    pub fn is_log(&self) -> bool {
        matches!(self, Scale::Log { .. })
    }

    /// Where `v` falls, from 0 (the origin) to 1 (the far end); values outside the
    /// axis are drawn at its ends.
    pub fn fraction(&self, v: f64) -> f64 {
        match *self {
            Scale::Linear { max, .. } => (v / max).clamp(0.0, 1.0),
            Scale::Log {
                lo_exp,
                hi_exp,
                zero,
            } => {
                let start = if zero { LOG_FROM } else { 0.0 };
                if v <= 0.0 || !v.is_finite() {
                    return if zero { ZERO_AT } else { 0.0 };
                }
                let decades = f64::from(hi_exp - lo_exp);
                let along = (v.log10() - f64::from(lo_exp)) / decades;
                start + along.clamp(0.0, 1.0) * (1.0 - start)
            }
        }
    }

    /// Where the axis is broken between zero and the first decade, when it is.
    pub fn break_at(&self) -> Option<f64> {
        match self {
            Scale::Log { zero: true, .. } => Some((ZERO_AT + LOG_FROM) / 2.0),
            _ => None,
        }
    }

    /// The ticks: every step of a linear axis; on a log axis zero (if shown), every
    /// decade, and 2× and 5× each decade (labelled when there are at most two decades, so
    /// that the axis always has three labels or more).
    pub fn ticks(&self) -> Vec<Tick> {
        match *self {
            Scale::Linear { max, step } => (0..=(max / step).round() as u32)
                .map(|i| {
                    let value = f64::from(i) * step;
                    Tick {
                        value,
                        label: tick_label(value),
                        major: true,
                    }
                })
                .collect(),
            Scale::Log {
                lo_exp,
                hi_exp,
                zero,
            } => {
                let mut ticks = Vec::new();
                if zero {
                    ticks.push(Tick {
                        value: 0.0,
                        label: "0".into(),
                        major: true,
                    });
                }
                let label_minor = hi_exp - lo_exp <= 2;
                for e in lo_exp..=hi_exp {
                    for (m, major) in [(1.0, true), (2.0, false), (5.0, false)] {
                        if e == hi_exp && !major {
                            break;
                        }
                        let value = m * 10f64.powi(e);
                        ticks.push(Tick {
                            value,
                            label: if major || label_minor {
                                decade_label(m, e)
                            } else {
                                String::new()
                            },
                            major,
                        });
                    }
                }
                ticks
            }
        }
    }
}

/// `m` × 10^`e` written out with the decimals it needs (0.002, 0.5, 20, 1000).
fn decade_label(m: f64, e: i32) -> String {
    let v = m * 10f64.powi(e);
    if e >= 0 {
        format!("{v:.0}")
    } else {
        format!("{v:.*}", (-e) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_axes_end_on_a_round_tick_just_above_the_largest_value() {
        assert_eq!(nice_step(786.0), 1000.0);
        assert_eq!(nice_step(2.1), 2.5);
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(nice_step(10.0), 10.0);
        assert_eq!(
            Scale::linear([4623.0]),
            Scale::Linear {
                max: 5000.0,
                step: 1000.0
            }
        );
        // Run 20261201-010445's largest req/s whisker: 30 000, not 50 000.
        assert_eq!(
            Scale::linear([27678.1, 18000.0]),
            Scale::Linear {
                max: 30000.0,
                step: 5000.0
            }
        );
        assert_eq!(
            Scale::linear([46.5]),
            Scale::Linear {
                max: 50.0,
                step: 10.0
            }
        );
        assert_eq!(
            Scale::linear([0.0, f64::NAN]),
            Scale::Linear {
                max: 1.0,
                step: 0.2
            }
        );
        for most in [
            0.7, 3.0, 17.5, 99.0, 101.0, 1013.0, 4623.0, 27678.0, 123456.0,
        ] {
            let Scale::Linear { max, step } = Scale::linear([most]) else {
                unreachable!()
            };
            let intervals = max / step;
            assert!(
                max >= most && (3.0..=6.0).contains(&intervals),
                "{most}: {max} {step}"
            );
        }
    }

    #[test]
    fn a_log_scale_separates_a_tenth_of_a_percent_from_one_percent_and_draws_zero_apart() {
        // Five configurations at 0% stale, two around 0.1% and 1%, one at 45%.
        let stale = [0.0, 0.0, 0.0, 0.0, 0.0, 0.1, 1.0, 45.0];
        let s = Scale::log(stale);
        assert_eq!(
            s,
            Scale::Log {
                lo_exp: -1,
                hi_exp: 2,
                zero: true
            }
        );
        let (zero, tenth, one, most) = (
            s.fraction(0.0),
            s.fraction(0.1),
            s.fraction(1.0),
            s.fraction(45.0),
        );
        // Three decades share what zero leaves: a decade is over a quarter of the axis.
        assert!(
            (one - tenth - (1.0 - LOG_FROM) / 3.0).abs() < 1e-9,
            "{tenth} {one}"
        );
        assert!(one - tenth > 0.25);
        assert_eq!(zero, ZERO_AT);
        assert!(tenth - zero >= LOG_FROM - ZERO_AT - 1e-9);
        assert!(zero < s.break_at().unwrap() && s.break_at().unwrap() < tenth);
        assert!(most < 1.0 && most > one);
        // On the old linear 0–50% axis, 0.1% and 1% were 1.8% of the axis apart.
        let linear = Scale::Linear {
            max: 50.0,
            step: 10.0,
        };
        assert!(linear.fraction(1.0) - linear.fraction(0.1) < 0.02);
    }

    #[test]
    fn log_scales_are_monotonic_and_stay_on_the_axis() {
        let s = Scale::log([0.0, 0.012, 3.4]);
        assert_eq!(
            s,
            Scale::Log {
                lo_exp: -2,
                hi_exp: 1,
                zero: true
            }
        );
        let mut last = -1.0;
        for v in [0.0, 0.01, 0.012, 0.05, 0.1, 0.5, 1.0, 3.4, 10.0] {
            let f = s.fraction(v);
            assert!(f > last && (0.0..=1.0).contains(&f), "{v}: {f}");
            last = f;
        }
        assert_eq!(s.fraction(1e6), 1.0);
        // Without a zero the decades take the whole axis.
        let s = Scale::log([5.0, 500.0]);
        assert_eq!(s.fraction(1.0), 0.0);
        assert_eq!(s.fraction(1000.0), 1.0);
        assert!(s.break_at().is_none());
        // One value, or none: still a decade wide.
        assert_eq!(
            Scale::log([1.0]),
            Scale::Log {
                lo_exp: 0,
                hi_exp: 1,
                zero: false
            }
        );
        assert_eq!(
            Scale::log([0.0]),
            Scale::Log {
                lo_exp: -1,
                hi_exp: 0,
                zero: true
            }
        );
    }

    #[test]
    fn ticks_name_zero_and_the_decades() {
        let labels = |s: &Scale| {
            s.ticks()
                .into_iter()
                .filter(|t| !t.label.is_empty())
                .map(|t| t.label)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            labels(&Scale::log([0.0, 0.1, 45.0])),
            ["0", "0.1", "1", "10", "100"]
        );
        assert_eq!(
            labels(&Scale::log([0.002, 0.09])),
            ["0.001", "0.002", "0.005", "0.01", "0.02", "0.05", "0.1"]
        );
        assert_eq!(
            labels(&Scale::Linear {
                max: 2000.0,
                step: 500.0
            }),
            ["0", "500", "1000", "1500", "2000"]
        );
    }

    #[test]
    fn auto_takes_a_log_scale_for_values_decades_apart() {
        assert!(Scale::auto([12.0, 14.0, 3000.0]).is_log());
        assert!(!Scale::auto([12.0, 14.0, 30.0]).is_log());
        assert!(!Scale::auto([0.0, 0.0]).is_log());
        assert_eq!(
            Scale::auto([10.0, 46.0]),
            Scale::Linear {
                max: 50.0,
                step: 10.0
            }
        );
    }
}
