//! How SQLite allocates: from mimalloc, Herald's own allocator, without
//! SQLite's memory statistics.
//!
//! By default SQLite keeps statistics of its memory (`SQLITE_CONFIG_MEMSTATUS`),
//! which takes a process-wide mutex around every allocation and free, and
//! allocates with the C library's `malloc`. On the hot path SQLite allocates
//! about a hundred times per delivery: the mutex and glibc's allocator together
//! were about 7 % of Herald's instructions per delivery (docs/performance.md,
//! "SQLite's allocations"). Herald reads none of those statistics.
//!
//! SQLite takes this configuration only before it initializes, and
//! `sqlite3_config` is not safe beside any other use of SQLite: [`configure`]
//! is called first thing in `main`, before any connection opens. Anywhere
//! else (a test process) SQLite keeps its defaults, which behave the same.

use std::ffi::{c_int, c_void};

use libmimalloc_sys as mi;
use rusqlite::ffi;

/// Tells SQLite to allocate from mimalloc and to keep no statistics. SQLite
/// refuses both once it has initialized, and then keeps its defaults.
///
/// # Safety
/// No other thread may use SQLite while this runs (call it before any
/// connection opens).
pub unsafe fn configure() {
    let methods = ffi::sqlite3_mem_methods {
        xMalloc: Some(malloc),
        xFree: Some(free),
        xRealloc: Some(realloc),
        xSize: Some(size),
        xRoundup: Some(roundup),
        xInit: Some(init),
        xShutdown: Some(shutdown),
        pAppData: std::ptr::null_mut(),
    };
    // SAFETY: as the caller promises; SQLite copies `methods` before it returns.
    unsafe {
        ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, 0 as c_int);
        ffi::sqlite3_config(ffi::SQLITE_CONFIG_MALLOC, &raw const methods);
    }
}

/// SQLite never asks for a negative size; a request it could not express is refused.
fn bytes(n: c_int) -> Option<usize> {
    usize::try_from(n).ok()
}

unsafe extern "C" fn malloc(n: c_int) -> *mut c_void {
    // SAFETY: mimalloc's allocation; its blocks are aligned to 16 bytes, more than SQLite's 8.
    bytes(n).map_or(std::ptr::null_mut(), |n| unsafe { mi::mi_malloc(n) })
}

unsafe extern "C" fn free(p: *mut c_void) {
    // SAFETY: `p` came from `malloc` or `realloc` here (or is null).
    unsafe { mi::mi_free(p) }
}

unsafe extern "C" fn realloc(p: *mut c_void, n: c_int) -> *mut c_void {
    // SAFETY: as in `free`; a failed resize leaves `p` as it was, as SQLite expects.
    bytes(n).map_or(std::ptr::null_mut(), |n| unsafe { mi::mi_realloc(p, n) })
}

unsafe extern "C" fn size(p: *mut c_void) -> c_int {
    // SAFETY: as in `free`. SQLite's blocks are far below 2 GiB.
    let usable = unsafe { mi::mi_usable_size(p) };
    c_int::try_from(usable).unwrap_or(c_int::MAX)
}

unsafe extern "C" fn roundup(n: c_int) -> c_int {
    // SAFETY: a pure query of mimalloc's size classes.
    let good = bytes(n).map(|bytes| unsafe { mi::mi_good_size(bytes) });
    good.and_then(|good| c_int::try_from(good).ok()).unwrap_or(n)
}

unsafe extern "C" fn init(_: *mut c_void) -> c_int {
    ffi::SQLITE_OK
}

unsafe extern "C" fn shutdown(_: *mut c_void) {}

#[cfg(test)]
mod tests {
    use super::*;

    // The methods themselves, called as SQLite calls them; `configure` is not called here, since
    // the test process's other tests use SQLite on other threads meanwhile.
    #[test]
    fn the_methods_allocate_resize_and_size_as_sqlite_expects() {
        unsafe {
            let p = malloc(100).cast::<u8>();
            assert!(!p.is_null());
            assert_eq!(p as usize % 8, 0, "SQLite needs 8-byte alignment");
            assert!(size(p.cast()) >= 100);
            assert!(roundup(100) >= 100);
            p.write_bytes(7, 100);
            let q = realloc(p.cast(), 5000).cast::<u8>();
            assert!(!q.is_null());
            assert!(size(q.cast()) >= 5000);
            assert!((0..100).all(|i| *q.add(i) == 7), "a resize keeps the contents");
            free(q.cast());
            free(std::ptr::null_mut());
            assert!(malloc(-1).is_null());
        }
    }
}
