//! The posts table: `p1…pM` in vectors indexed by number, each author's posts indexed,
//! and the data sets it starts from.
//!
//! Two data sets exist. Without flags, the seed's four posts (`p1…p4` by `u1`, `u2`,
//! `u1`, `u1`), exactly as the talk's experiment had them. With `--posts M --users N`,
//! posts `p1…pM` whose author is drawn from `u1…uN`: post `p(k+1)`'s author is
//! `u(1 + ⌊draw(seed, k) · N / 2⁶⁴⌋)`, where `draw` is the `k`-th SplitMix64 output
//! ([`subgraph_host::random`]) and `seed` is `--data-seed`. Authors are uniform over the
//! users, and the same flags always give the same table. Titles are `Post k` and
//! contents `Content k`, as in the seed.
//!
//! Layout, for a million posts in a few tens of MiB and milliseconds: a post is its
//! author's index (4 bytes) and the title a mutation gave it (`None` until then, 16
//! bytes); contents never change and are formatted when read. Per-author lookups
//! (`User.topPosts`) read [`subgraph_host::groups::Groups`]: for each author, its posts
//! in id order, one `u32` per post, built once by a counting sort.

use subgraph_host::groups::Groups;
use subgraph_host::{ids, random};

/// The most posts a data set may have (ids stay within `u32`, memory within reason).
pub const MAX_POSTS: u32 = 100_000_000;
/// The most users post-service may draw authors from (user-service's own bound).
pub const MAX_USERS: u32 = 100_000_000;

/// The data-set options of `post-service`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DataArgs {
    /// Generate posts p1…pM instead of the seed's four, with authors drawn uniformly
    /// from u1…uN (needs --users).
    #[arg(long, value_name = "M", requires = "users",
          value_parser = clap::value_parser!(u32).range(1..=MAX_POSTS as i64))]
    pub posts: Option<u32>,
    /// The number of users the authors are drawn from: give user-service the same
    /// --users N (needs --posts).
    #[arg(long, value_name = "N", requires = "posts",
          value_parser = clap::value_parser!(u32).range(1..=MAX_USERS as i64))]
    pub users: Option<u32>,
    /// The seed the authors are drawn with (needs --posts).
    #[arg(long, value_name = "SEED", requires = "posts", default_value_t = 1)]
    pub data_seed: u64,
}

/// One post as read: a copy, so that no lock is held while it is resolved.
#[derive(Debug, Clone)]
pub struct PostRow {
    /// Row index: the post's id is `p(index + 1)`.
    pub index: u32,
    pub title: String,
    /// The author's row index: its id is `u(author + 1)`.
    pub author: u32,
}

impl PostRow {
    pub fn pid(&self) -> String {
        ids::id("p", self.index as usize)
    }
    pub fn content(&self) -> String {
        format!("Content {}", self.index + 1)
    }
    pub fn author_id(&self) -> String {
        ids::id("u", self.author as usize)
    }
}

/// The posts, indexed by id number − 1.
#[derive(Debug)]
pub struct Posts {
    /// Each post's author, as a user row index.
    authors: Vec<u32>,
    /// The title a mutation gave each post, or `None` for `Post k`.
    titles: Vec<Option<Box<str>>>,
    /// Each author's posts, in id order.
    by_author: Groups,
}

impl Default for Posts {
    /// The seed: `p1…p4` by `u1`, `u2`, `u1`, `u1`.
    fn default() -> Self {
        Posts::with_authors(vec![0, 1, 0, 0], 2)
    }
}

impl Posts {
    /// Posts `p1…pm` with authors drawn from `u1…un` with `seed`.
    pub fn generated(m: u32, n: u32, seed: u64) -> Posts {
        let n = n.max(1);
        let authors = (0..m as u64)
            .map(|k| random::below(random::draw(seed, k), n as u64) as u32)
            .collect();
        Posts::with_authors(authors, n)
    }

    /// The data set the options ask for.
    pub fn from_args(args: &DataArgs) -> Posts {
        match (args.posts, args.users) {
            (Some(m), Some(n)) => Posts::generated(m, n, args.data_seed),
            _ => Posts::default(),
        }
    }

    /// Posts whose authors are `authors` (user row indexes below `users`), with the
    /// per-author index.
    fn with_authors(authors: Vec<u32>, users: u32) -> Posts {
        Posts {
            titles: vec![None; authors.len()],
            by_author: Groups::build(users, &authors),
            authors,
        }
    }

    pub fn len(&self) -> usize {
        self.authors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.authors.is_empty()
    }

    fn row(&self, index: usize) -> PostRow {
        PostRow {
            index: index as u32,
            title: match &self.titles[index] {
                Some(t) => t.to_string(),
                None => format!("Post {}", index + 1),
            },
            author: self.authors[index],
        }
    }

    /// The post with id `pid`, if there is one.
    pub fn get(&self, pid: &str) -> Option<PostRow> {
        let index = ids::index("p", pid).filter(|&i| i < self.len())?;
        Some(self.row(index))
    }

    /// The first `count` posts, in id order.
    pub fn first(&self, count: usize) -> Vec<PostRow> {
        (0..count.min(self.len())).map(|i| self.row(i)).collect()
    }

    /// The first `count` posts of the user with id `author`, in id order (none for an
    /// id that wrote nothing).
    pub fn first_by(&self, author: &str, count: usize) -> Vec<PostRow> {
        let Some(a) = ids::index("u", author) else {
            return Vec::new();
        };
        self.by_author
            .of(a)
            .iter()
            .take(count)
            .map(|&p| self.row(p as usize))
            .collect()
    }

    /// Retitle post `pid`; the post as it now is, or `None` when there is none.
    pub fn retitle(&mut self, pid: &str, title: String) -> Option<PostRow> {
        let index = ids::index("p", pid).filter(|&i| i < self.len())?;
        self.titles[index] = Some(title.into());
        Some(self.row(index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pids(rows: &[PostRow]) -> Vec<String> {
        rows.iter().map(PostRow::pid).collect()
    }

    #[test]
    fn the_seed_is_the_talks_four_posts() {
        let seed = Posts::default();
        assert_eq!(pids(&seed.first(10)), ["p1", "p2", "p3", "p4"]);
        assert_eq!(pids(&seed.first_by("u1", 10)), ["p1", "p3", "p4"]);
        assert_eq!(pids(&seed.first_by("u2", 10)), ["p2"]);
        assert!(seed.first_by("u3", 10).is_empty());
        let p2 = seed.get("p2").unwrap();
        assert_eq!(
            (p2.title.as_str(), p2.content().as_str()),
            ("Post 2", "Content 2")
        );
        assert_eq!(p2.author_id(), "u2");
        assert!(seed.get("p5").is_none() && seed.get("p0").is_none());
    }

    #[test]
    fn the_author_index_agrees_with_every_post() {
        let posts = Posts::generated(10_000, 300, 42);
        let mut seen = 0;
        for u in 1..=301 {
            let mine = posts.first_by(&format!("u{u}"), usize::MAX);
            assert!(mine.windows(2).all(|w| w[0].index < w[1].index));
            assert!(mine.iter().all(|p| p.author_id() == format!("u{u}")));
            seen += mine.len();
        }
        assert_eq!(seen, 10_000);
        assert_eq!(
            pids(&Posts::generated(10_000, 300, 42).first(20)),
            pids(&posts.first(20))
        );
    }
}
