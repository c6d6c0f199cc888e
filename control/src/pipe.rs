//! A closed output pipe is a normal end for a command-line tool (`rocefab plan ... | head`,
//! `rocefab capture -w - | tshark -c 50`): these helpers recognise it, however the failed write
//! surfaced, so `main` can end quietly with exit 0.
use std::any::Any;
use std::io::ErrorKind;

/// True when an `io::Error` of kind `BrokenPipe` is anywhere in the error's chain (also inside a
/// pcap-file error, whose own message would say "Error reading bytes" for a failed write).
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == ErrorKind::BrokenPipe))
}

/// Panic message of std's `print!`/`println!` when stdout is a closed pipe.
fn is_broken_pipe_message(msg: &str) -> bool {
    msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe")
}

/// True when a caught panic is std's `println!` failing on a closed stdout.
pub fn is_broken_pipe_panic(payload: &(dyn Any + Send)) -> bool {
    let msg = payload.downcast_ref::<String>().map(String::as_str).or_else(|| payload.downcast_ref::<&str>().copied());
    msg.is_some_and(is_broken_pipe_message)
}

/// Installs a panic hook that prints nothing for a `println!` on a closed stdout and defers to the
/// previous hook (message and backtrace) for every other panic.
pub fn quiet_print_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !is_broken_pipe_panic(info.payload()) {
            previous(info);
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broken_pipe_is_found_through_contexts_and_sources() {
        let io = std::io::Error::from(ErrorKind::BrokenPipe);
        let e = anyhow::Error::new(io).context("writing -").context("capture");
        assert!(is_broken_pipe(&e));
        let other = anyhow::Error::new(std::io::Error::from(ErrorKind::PermissionDenied)).context("writing x.pcapng");
        assert!(!is_broken_pipe(&other));
        assert!(!is_broken_pipe(&anyhow::anyhow!("Broken pipe (os error 32)")), "a message alone is not a closed pipe");
    }

    #[test]
    fn only_the_stdout_print_panic_is_quiet() {
        let p: Box<dyn Any + Send> = Box::new(String::from("failed printing to stdout: Broken pipe (os error 32)"));
        assert!(is_broken_pipe_panic(p.as_ref()));
        let p: Box<dyn Any + Send> = Box::new("failed printing to stdout: Broken pipe (os error 32)");
        assert!(is_broken_pipe_panic(p.as_ref()));
        let p: Box<dyn Any + Send> = Box::new(String::from("index out of bounds"));
        assert!(!is_broken_pipe_panic(p.as_ref()));
        let p: Box<dyn Any + Send> = Box::new(String::from("failed printing to stdout: Permission denied"));
        assert!(!is_broken_pipe_panic(p.as_ref()));
    }
}
