//! Running the rule queries and turning their rows into findings: the
//! catalog of views and rules (`catalog`), registering the views
//! (`views`), what running a query takes (`jobs`), evaluating the catalog
//! and the readings of later versions (`running`, `readings`, split by
//! `differences`, and `planned` over a neighbourhood), and the rows ->
//! findings (`findings`).

pub mod catalog;
mod differences;
pub mod ev_table;
mod findings;
pub mod helpers;
mod jobs;
mod planned;
pub mod readings;
pub mod reference;
mod running;
pub mod tasks_view;
pub mod transitions_view;
mod views;

pub use findings::{PLACE_COLUMNS, RuleRun, Window};
pub use running::{FirstReading, finish, first_reading};
pub use views::{Materialize, ViewFiles, register_views};
