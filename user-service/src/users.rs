//! The users table: `u1…uN` in a vector indexed by number, with the data set it starts
//! from.
//!
//! Two data sets exist. Without `--users`, the seed's two users (`u1` John, `u2` Jane),
//! exactly as the talk's experiment had them. With `--users N`, users `u1…uN` named
//! `User 1…User N`. A generated name is not stored until it changes: a row holds only
//! the name a seed or a mutation gave it, so a million users cost 16 bytes each and
//! start at once. Nothing here is random, so the same `--users N` always gives the same
//! table, and post-service's `--users N` draws its authors from exactly these ids.

/// The most users a data set may have (ids stay within `u32`, memory within reason).
pub const MAX_USERS: u32 = 100_000_000;

/// The data-set options of `user-service`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DataArgs {
    /// Generate users u1…uN named "User 1"…"User N" instead of the seed's u1 John and
    /// u2 Jane. Give post-service the same --users N.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_USERS as i64))]
    pub users: Option<u32>,
}

/// The users, indexed by id number − 1.
#[derive(Debug)]
pub struct Users {
    /// The name each user was given, or `None` for its generated name.
    names: Vec<Option<Box<str>>>,
}

impl Default for Users {
    /// The seed: `u1` John and `u2` Jane.
    fn default() -> Self {
        Users {
            names: vec![Some("John".into()), Some("Jane".into())],
        }
    }
}

impl Users {
    /// Users `u1…un`, named `User 1…User n`.
    pub fn generated(n: u32) -> Users {
        Users {
            names: vec![None; n as usize],
        }
    }

    /// The data set the options ask for.
    pub fn from_args(args: &DataArgs) -> Users {
        args.users.map(Users::generated).unwrap_or_default()
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The name of the user with id `id`, if there is one.
    pub fn name(&self, id: &str) -> Option<String> {
        let index = subgraph_host::ids::index("u", id)?;
        let name = self.names.get(index)?;
        Some(match name {
            Some(name) => name.to_string(),
            None => format!("User {}", index + 1),
        })
    }

    /// Add a user named `name`; its id is the next number.
    pub fn create(&mut self, name: String) -> String {
        self.names.push(Some(name.into()));
        subgraph_host::ids::id("u", self.names.len() - 1)
    }

    /// Rename user `id`; false when there is none.
    pub fn rename(&mut self, id: &str, name: String) -> bool {
        match subgraph_host::ids::index("u", id).and_then(|i| self.names.get_mut(i)) {
            Some(slot) => {
                *slot = Some(name.into());
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_and_a_generated_set() {
        let seed = Users::default();
        assert_eq!(seed.name("u1").as_deref(), Some("John"));
        assert_eq!(seed.name("u2").as_deref(), Some("Jane"));
        assert_eq!(seed.name("u3"), None);
        let mut big = Users::generated(1000);
        assert_eq!(big.name("u1000").as_deref(), Some("User 1000"));
        assert_eq!(big.name("u1001"), None);
        assert_eq!(big.name("u0"), None);
        assert!(big.rename("u7", "Seven".into()));
        assert!(!big.rename("u1001", "nobody".into()));
        assert_eq!(big.name("u7").as_deref(), Some("Seven"));
        assert_eq!(big.create("New".into()), "u1001");
        assert_eq!(big.name("u1001").as_deref(), Some("New"));
    }
}
