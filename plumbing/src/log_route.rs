//! A log file per unit in a daemon that runs several (`rocefab-switchd` with many switches): a
//! thread says whose lines it is writing ([`enter`]), and the daemons' writer ([`Routed`]) puts
//! each line in that unit's file, or in the process's own log when the thread is on no unit's
//! behalf. A switch's control thread enters its route once; a data-plane worker enters the route
//! of each switch whose pass it runs (a thread-local store: nothing allocated, no lock taken, on
//! the data path; the file's lock is taken only when a line is written).
use std::cell::Cell;
use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

/// One unit's log: an index into the files [`open`] opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route(usize);

static ROUTES: OnceLock<Vec<Mutex<File>>> = OnceLock::new();

thread_local! {
    static CURRENT: Cell<Option<Route>> = const { Cell::new(None) };
}

/// Opens (appending, creating) one log file per unit, in order; once per process.
pub fn open(paths: &[PathBuf]) -> io::Result<Vec<Route>> {
    let files = paths
        .iter()
        .map(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map(Mutex::new)
                .map_err(|e| io::Error::new(e.kind(), format!("opening log file {}: {e}", p.display())))
        })
        .collect::<io::Result<Vec<_>>>()?;
    let n = files.len();
    ROUTES.set(files).map_err(|_| io::Error::other("the per-unit log files are already open"))?;
    Ok((0..n).map(Route).collect())
}

/// From now on this thread's lines go to `route`'s file (`None`: the process's log); returns
/// the route it had.
pub fn enter(route: Option<Route>) -> Option<Route> {
    CURRENT.with(|c| c.replace(route))
}

/// On a route until dropped ([`scoped`]), then back on the route the thread had.
pub struct Scope(Option<Route>);

/// This thread's lines go to `route`'s file until the returned [`Scope`] is dropped.
pub fn scoped(route: Option<Route>) -> Scope {
    Scope(enter(route))
}

impl Drop for Scope {
    fn drop(&mut self) {
        enter(self.0);
    }
}

/// The route this thread's lines go to.
pub fn current() -> Option<Route> {
    CURRENT.with(Cell::get)
}

/// The daemons' `MakeWriter`: the calling thread's route's file, else `fallback`.
pub struct Routed<W> {
    fallback: Mutex<W>,
}

impl<W> Routed<W> {
    pub fn new(fallback: W) -> Self {
        Routed { fallback: Mutex::new(fallback) }
    }
}

/// A locked destination for one line.
pub enum RoutedWriter<'a, W> {
    Unit(MutexGuard<'static, File>),
    Process(MutexGuard<'a, W>),
}

impl<W: Write> Write for RoutedWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            RoutedWriter::Unit(f) => f.write(buf),
            RoutedWriter::Process(w) => w.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            RoutedWriter::Unit(f) => f.flush(),
            RoutedWriter::Process(w) => w.flush(),
        }
    }
}

impl<'a, W: Write + 'a> tracing_subscriber::fmt::MakeWriter<'a> for Routed<W> {
    type Writer = RoutedWriter<'a, W>;

    fn make_writer(&'a self) -> Self::Writer {
        // A line being written while another thread panicked holding the lock is still written.
        match current().and_then(|r| ROUTES.get().and_then(|v| v.get(r.0))) {
            Some(f) => RoutedWriter::Unit(f.lock().unwrap_or_else(PoisonError::into_inner)),
            None => RoutedWriter::Process(self.fallback.lock().unwrap_or_else(PoisonError::into_inner)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::fmt::MakeWriter;

    /// Lines of a thread on a route land in its file, the others in the fallback; the route is
    /// per thread.
    #[test]
    fn lines_go_to_the_file_of_the_route_their_thread_is_on() {
        let dir = tempfile::tempdir().unwrap();
        let paths = [dir.path().join("rail1.log"), dir.path().join("spine1.log")];
        let routes = open(&paths).unwrap();
        assert!(open(&paths).is_err(), "opened twice");
        let w = Routed::new(Vec::<u8>::new());
        writeln!(w.make_writer(), "process line").unwrap();
        assert_eq!(enter(Some(routes[1])), None);
        writeln!(w.make_writer(), "spine1 line").unwrap();
        {
            let _rail1 = scoped(Some(routes[0]));
            writeln!(w.make_writer(), "rail1 scoped").unwrap();
        }
        assert_eq!(current(), Some(routes[1]), "the scope gave the route back");
        std::thread::scope(|s| {
            s.spawn(|| {
                assert_eq!(current(), None, "a new thread is on no route");
                enter(Some(routes[0]));
                writeln!(w.make_writer(), "rail1 line").unwrap();
            });
        });
        assert_eq!(enter(None), Some(routes[1]));
        writeln!(w.make_writer(), "process again").unwrap();
        let read = |i: usize| std::fs::read_to_string(&paths[i]).unwrap();
        assert_eq!((read(0).as_str(), read(1).as_str()), ("rail1 scoped\nrail1 line\n", "spine1 line\n"));
        let process = w.fallback.into_inner().unwrap();
        assert_eq!(String::from_utf8(process).unwrap(), "process line\nprocess again\n");
    }
}
