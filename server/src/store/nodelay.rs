//! TCP_NODELAY on the connections to PostgreSQL. sqlx 0.9.0 leaves Nagle's
//! algorithm on (transact-rs/sqlx#4335: fixed upstream, not yet released), so
//! a statement longer than one TCP segment, such as a batch, holds its last
//! segment until the server acknowledges the others, and the server delays
//! that acknowledgement by up to 40 ms. The pool calls this after opening each
//! connection: it sets the option on every TCP socket of this process that is
//! connected to the server's port, the new connection's among them.

/// Sets TCP_NODELAY on this process's sockets connected to `port`.
pub fn set_on_sockets_to(port: u16) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::BorrowedFd;

        let Ok(entries) = std::fs::read_dir("/proc/self/fd") else { return };
        for fd in entries.flatten().filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok()) {
            // SAFETY: the descriptor is only borrowed for two system calls (getpeername,
            // setsockopt), which touch no memory of ours. Had it been closed or reused meanwhile,
            // they fail (not a socket) or set the option on some other TCP socket, which is
            // harmless. A socket to another host on the same port gets it too, equally harmless.
            let fd = unsafe { BorrowedFd::borrow_raw(fd) };
            let socket = socket2::SockRef::from(&fd);
            let peer = socket.peer_addr().ok().and_then(|address| address.as_socket());
            if peer.is_some_and(|address| address.port() == port) {
                let _ = socket.set_tcp_nodelay(true);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = port;
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn the_sockets_to_the_port_get_nodelay_and_others_keep_nagle() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        let to_server = TcpStream::connect(server.local_addr().unwrap()).unwrap();
        let to_other = TcpStream::connect(other.local_addr().unwrap()).unwrap();
        assert!(!to_server.nodelay().unwrap(), "Nagle is on by default");
        super::set_on_sockets_to(server.local_addr().unwrap().port());
        assert!(to_server.nodelay().unwrap());
        assert!(!to_other.nodelay().unwrap());
    }
}
