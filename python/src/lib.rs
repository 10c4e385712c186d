//! `hvaudit._hvaudit`: the Rust half of the Python module `hvaudit`
//! (python/hvaudit/__init__.py is the other half).
//!
//! Options arrive as the command line's words: `hvaudit/__init__.py` turns
//! keyword arguments into `--option value` and this module parses them
//! with the CLI's own parser (src/cli.rs, src/config.rs) and turns them
//! into the library's options as the binary does (src/translate.rs), so an
//! audit from Python has the CLI's options, defaults, validation,
//! configuration file and messages, with no second copy of any of them.
//! Those modules of the binary are compiled into this crate (`#[path]`
//! below); where the tables live (loaded, on disk, in place, on a
//! cluster) is the library's choice (`hvaudit::tables::Tables::open`), as
//! it is the binary's.
//!
//! Work runs on a thread of its own with the GIL released; the calling
//! thread wakes every 50 ms to let Python handle signals, so Ctrl-C raises
//! `KeyboardInterrupt` at once (see `wait`).

// The binary's modules: what only the binary calls is unused here.
#[path = "../../src/cli.rs"]
#[allow(dead_code)]
mod cli;
#[path = "../../src/config.rs"]
#[allow(dead_code)]
mod config;
/// `hvaudit sql`'s statements: split, checked and run as the CLI runs them.
#[path = "../../src/commands/sql_statement.rs"]
#[allow(dead_code)]
mod sql_statement;
#[path = "../../src/translate.rs"]
#[allow(dead_code)]
mod translate;

mod arrow;
mod run;

// The allocator of the binary (src/main.rs) for the Rust half's own
// allocations: Arrow's many large buffers. Python's objects keep Python's.
// Unlike the binary, freed pages go back to the kernel as usual: a
// notebook lives on after an audit.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    _hvaudit,
    HvauditError,
    PyException,
    "Any error hvaudit reports; the CLI exits 2 on it."
);
create_exception!(
    _hvaudit,
    UsageError,
    HvauditError,
    "An option or argument the CLI would refuse (a wrong value, a conflict, a configuration file's error)."
);
create_exception!(
    _hvaudit,
    InputError,
    HvauditError,
    "The inputs cannot be read (no such file, no log, no events)."
);
create_exception!(
    _hvaudit,
    RuleError,
    HvauditError,
    "A rule file cannot be used (parse or plan error), or a rule failed."
);

#[pymodule]
fn _hvaudit(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Python handles SIGINT (KeyboardInterrupt): the CLI's handler, which
    // exits the process, must never be installed in an interpreter.
    hvaudit::signals::leave_interrupts_to_host();
    hvaudit::progress::start_clock();
    let py = m.py();
    m.add("HvauditError", py.get_type::<HvauditError>())?;
    m.add("UsageError", py.get_type::<UsageError>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("RuleError", py.get_type::<RuleError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(run::audit, m)?)?;
    m.add_function(wrap_pyfunction!(run::replay, m)?)?;
    m.add_class::<run::Report>()?;
    m.add_class::<run::Session>()?;
    m.add_class::<run::Replay>()?;
    m.add_class::<arrow::ArrowStream>()?;
    Ok(())
}
