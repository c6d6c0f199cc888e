//! placeholder (control helper)
