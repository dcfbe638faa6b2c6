//! Rebuilds the crate when its SQL changes. sqlx's `query_file!` tells
//! cargo about the files of queries that return rows, not of those that
//! return none (an UPDATE, a DELETE): a warm target kept running an
//! edited `recover.sql`'s old text, and a test of its new one failed
//! against the old. Migrations and the offline query data are read by
//! macros too.

fn main() {
    for path in ["queries", "migrations", ".sqlx"] {
        println!("cargo:rerun-if-changed={path}");
    }
}
