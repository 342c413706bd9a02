//! One switch port: an AF_PACKET socket bound to an interface, non-blocking, that receives only
//! frames arriving on the interface (PACKET_IGNORE_OUTGOING) and tells whether the transport
//! checksum was left to offload (PACKET_AUXDATA, TP_STATUS_CSUMNOTREADY).

use std::ffi::CString;
use std::io;
use std::mem;

const PACKET_AUXDATA: libc::c_int = 8;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
const PACKET_OTHERHOST: u8 = 3;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn setsockopt_int(
    fd: libc::c_int,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: passing a pointer to a live c_int and its size.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &value as *const libc::c_int as *const libc::c_void,
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// A received frame's facts besides its bytes.
#[derive(Debug, Clone, Copy)]
pub struct RxInfo {
    pub len: usize,
    /// The transport checksum is only a partial (pseudo-header) sum: fill it before forwarding.
    pub csum_not_ready: bool,
    /// Addressed to another machine's MAC (PACKET_OTHERHOST: a frame the network flooded).
    pub other_host: bool,
}

pub struct Port {
    pub ifname: String,
    pub mac: [u8; 6],
    fd: libc::c_int,
}

impl Port {
    /// Open an AF_PACKET socket on `ifname`.
    pub fn open(ifname: &str) -> io::Result<Port> {
        let name = CString::new(ifname).map_err(|_| io::Error::other("bad interface name"))?;
        // SAFETY: plain FFI call with a valid C string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) } as i32;
        if ifindex == 0 {
            return Err(io::Error::other(format!(
                "no interface {ifname:?} in this namespace"
            )));
        }
        let proto = (libc::ETH_P_ALL as u16).to_be() as libc::c_int;
        // SAFETY: plain FFI call.
        let fd = cvt(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                proto,
            )
        })?;
        let port = Port {
            ifname: ifname.to_string(),
            mac: [0; 6],
            fd,
        };
        setsockopt_int(fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)?;
        setsockopt_int(fd, libc::SOL_PACKET, PACKET_AUXDATA, 1)?;
        // best effort: skip the (empty) qdisc layer on transmit; larger socket buffers
        let _ = setsockopt_int(fd, libc::SOL_PACKET, PACKET_QDISC_BYPASS, 1);
        let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 8 << 20);
        let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, 8 << 20);
        // SAFETY: zeroed sockaddr_ll is a valid value; fields set below.
        let mut sll: libc::sockaddr_ll = unsafe { mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: sll is a valid sockaddr_ll of the given size.
        cvt(unsafe {
            libc::bind(
                fd,
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
        let mut port = port;
        port.mac = read_mac(ifname)?;
        // drop whatever arrived between socket() and bind() (frames of other interfaces)
        let mut buf = vec![0u8; 2048];
        while let Ok(Some(_)) = port.recv(&mut buf) {}
        Ok(port)
    }

    pub fn fd(&self) -> libc::c_int {
        self.fd
    }

    /// Receive one frame into `buf`; `Ok(None)` when nothing is waiting. Truncated frames
    /// (larger than `buf`) are reported with their true length, which exceeds `buf.len()`.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<RxInfo>> {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        let mut cbuf = [0u64; 16];
        // SAFETY: a zeroed sockaddr_ll is a valid value; the kernel fills it in.
        let mut from: libc::sockaddr_ll = unsafe { mem::zeroed() };
        // SAFETY: zeroed msghdr is valid; pointers set to live buffers below.
        let mut msg: libc::msghdr = unsafe { mem::zeroed() };
        msg.msg_name = &mut from as *mut libc::sockaddr_ll as *mut libc::c_void;
        msg.msg_namelen = mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = mem::size_of_val(&cbuf) as _;
        // SAFETY: msg points to live buffers for the duration of the call.
        let n = unsafe { libc::recvmsg(self.fd, &mut msg, libc::MSG_TRUNC) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
                _ => Err(e),
            };
        }
        let mut csum_not_ready = false;
        // SAFETY: walking the control messages the kernel wrote into cbuf.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == PACKET_AUXDATA {
                    let aux = libc::CMSG_DATA(c) as *const libc::tpacket_auxdata;
                    let status = std::ptr::read_unaligned(aux).tp_status;
                    csum_not_ready = status & TP_STATUS_CSUMNOTREADY != 0;
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        Ok(Some(RxInfo {
            len: n as usize,
            csum_not_ready,
            other_host: from.sll_pkttype == PACKET_OTHERHOST,
        }))
    }

    /// Transmit one frame; false if the kernel refused it (buffer full), which counts as a drop.
    pub fn send(&self, frame: &[u8]) -> io::Result<bool> {
        // SAFETY: frame is a live buffer of the given length.
        let n = unsafe {
            libc::send(
                self.fd,
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
                0,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => Ok(false),
                _ => Err(e),
            };
        }
        Ok(true)
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        // SAFETY: closing our own descriptor once.
        unsafe { libc::close(self.fd) };
    }
}

fn read_mac(ifname: &str) -> io::Result<[u8; 6]> {
    let s = std::fs::read_to_string(format!("/sys/class/net/{ifname}/address"))?;
    crate::config::parse_mac(s.trim()).map_err(io::Error::other)
}
