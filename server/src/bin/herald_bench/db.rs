//! A fresh database and working directory per scenario, removed afterwards.

use std::path::PathBuf;

use sea_orm::{ConnectionTrait, Database};

use crate::Result;

pub struct Scratch {
    /// Holds herald's log, and the SQLite file when no URL was given.
    pub dir: PathBuf,
    pub database_url: String,
    /// The PostgreSQL server and database created for this scenario.
    postgres: Option<(String, String)>,
}

impl Scratch {
    /// No URL: a SQLite file in a new temporary directory. A postgres:// URL: a new
    /// database on that server. Any other URL is used as given.
    pub async fn new(given: Option<&str>) -> Result<Scratch> {
        let name = format!("herald_bench_{}", ulid::Ulid::new().to_string().to_lowercase());
        let dir = std::env::temp_dir().join(&name);
        std::fs::create_dir_all(&dir)?;
        match given {
            None => {
                let database_url = format!("sqlite://{}?mode=rwc", dir.join("bench.db").display());
                Ok(Scratch { dir, database_url, postgres: None })
            }
            Some(base) if base.starts_with("postgres") => {
                let admin = Database::connect(base).await?;
                admin.execute_unprepared(&format!("CREATE DATABASE {name}")).await?;
                admin.close().await?;
                let mut url = url::Url::parse(base)?;
                url.set_path(&format!("/{name}"));
                Ok(Scratch { dir, database_url: url.to_string(), postgres: Some((base.to_owned(), name)) })
            }
            Some(other) => Ok(Scratch { dir, database_url: other.to_owned(), postgres: None }),
        }
    }

    /// Removes what `new` made. Kept when `keep` is set (after a failure, for the log).
    pub async fn remove(self, keep: bool) {
        if let Some((base, name)) = &self.postgres
            && let Ok(admin) = Database::connect(base.as_str()).await
        {
            let _ = admin.execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
            let _ = admin.close().await;
        }
        if keep {
            eprintln!("kept {} for inspection", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
