//! The `bpf(2)` system call, spoken directly rather than through libbpf or aya, so that
//! building skyline needs no C toolchain and no LLVM, and an instruction builder for the small
//! programs written by hand in Rust.
//!
//! Each command's attributes are a `repr(C)` struct holding the leading fields of the kernel's
//! `union bpf_attr` for that command, up to the last one used. The kernel takes a shorter
//! attribute block than its own and reads the missing fields as zero, so no padding to the
//! full union is needed.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// The commands of `bpf(2)` used here (`enum bpf_cmd`).
#[derive(Clone, Copy)]
#[repr(i32)]
enum Cmd {
    MapCreate = 0,
    MapUpdateElem = 2,
    ProgLoad = 5,
    #[cfg(test)]
    ProgTestRun = 10,
    LinkCreate = 28,
}

/// `BPF_PROG_TYPE_XDP`.
const PROG_TYPE_XDP: u32 = 6;
/// `BPF_MAP_TYPE_XSKMAP`: receive queue to AF_XDP socket.
pub const MAP_TYPE_XSKMAP: u32 = 17;
/// `BPF_XDP`: the attach type of an XDP program linked to a network device.
const ATTACH_TYPE_XDP: u32 = 37;
/// `BPF_PSEUDO_MAP_FD`: in a 64-bit immediate load, the immediate is a map's descriptor, which
/// the verifier replaces with the map's address.
const PSEUDO_MAP_FD: u8 = 1;
/// Size of the verifier log buffer: far more than the verifier says about a program of a few
/// dozen instructions, within the kernel's limit for the buffer.
const LOG_SIZE: usize = 256 << 10;

/// A register of the BPF machine: `R0` takes return values, `R1`..`R5` arguments (clobbered by
/// calls), `R6`..`R9` survive calls, `R10` is the read-only frame pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reg(u8);

/// Return value of the program and of helper calls.
pub const R0: Reg = Reg(0);
/// First argument; the context pointer when the program starts.
pub const R1: Reg = Reg(1);
/// Second argument.
pub const R2: Reg = Reg(2);
/// Third argument.
pub const R3: Reg = Reg(3);
/// Fourth argument.
pub const R4: Reg = Reg(4);
/// Fifth argument.
pub const R5: Reg = Reg(5);

// Instruction classes, sizes, modes, operations and sources (`linux/bpf_common.h`, `linux/bpf.h`).
const CLASS_LD: u8 = 0x00;
const CLASS_LDX: u8 = 0x01;
const CLASS_JMP: u8 = 0x05;
const CLASS_JMP32: u8 = 0x06;
const CLASS_ALU: u8 = 0x04;
const CLASS_ALU64: u8 = 0x07;
const SIZE_W: u8 = 0x00;
const SIZE_H: u8 = 0x08;
const SIZE_B: u8 = 0x10;
const SIZE_DW: u8 = 0x18;
const MODE_IMM: u8 = 0x00;
const MODE_MEM: u8 = 0x60;
const SRC_K: u8 = 0x00;
const SRC_X: u8 = 0x08;
const OP_ADD: u8 = 0x00;
const OP_AND: u8 = 0x50;
const OP_MOV: u8 = 0xb0;
const OP_JGT: u8 = 0x20;
const OP_JNE: u8 = 0x50;
const OP_CALL: u8 = 0x80;
const OP_EXIT: u8 = 0x90;

/// One BPF instruction, laid out as the kernel's `struct bpf_insn`: opcode, destination and
/// source register in one byte, a signed 16-bit offset and a signed 32-bit immediate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

impl Insn {
    fn new(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> Insn {
        // The register nibbles are C bitfields, whose order follows the byte order.
        let regs = if cfg!(target_endian = "little") {
            dst.0 | (src.0 << 4)
        } else {
            (dst.0 << 4) | src.0
        };
        Insn { code, regs, off, imm }
    }

    /// `dst = *(u32 *)(src + off)`, zero-extended.
    pub fn ldx_w(dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(CLASS_LDX | MODE_MEM | SIZE_W, dst, src, off, 0)
    }

    /// `dst = *(u16 *)(src + off)`, zero-extended.
    pub fn ldx_h(dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(CLASS_LDX | MODE_MEM | SIZE_H, dst, src, off, 0)
    }

    /// `dst = *(u8 *)(src + off)`, zero-extended.
    pub fn ldx_b(dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(CLASS_LDX | MODE_MEM | SIZE_B, dst, src, off, 0)
    }

    /// `dst = src`, all 64 bits.
    pub fn mov64_reg(dst: Reg, src: Reg) -> Insn {
        Insn::new(CLASS_ALU64 | OP_MOV | SRC_X, dst, src, 0, 0)
    }

    /// `dst = imm`, sign-extended to 64 bits.
    pub fn mov64_imm(dst: Reg, imm: i32) -> Insn {
        Insn::new(CLASS_ALU64 | OP_MOV | SRC_K, dst, R0, 0, imm)
    }

    /// `dst += imm`, 64-bit.
    pub fn add64_imm(dst: Reg, imm: i32) -> Insn {
        Insn::new(CLASS_ALU64 | OP_ADD | SRC_K, dst, R0, 0, imm)
    }

    /// `dst = (u32)dst & imm`.
    pub fn and32_imm(dst: Reg, imm: i32) -> Insn {
        Insn::new(CLASS_ALU | OP_AND | SRC_K, dst, R0, 0, imm)
    }

    /// `if dst > src goto +off`, unsigned 64-bit: how packet bounds are checked.
    pub fn jgt_reg(dst: Reg, src: Reg, off: i16) -> Insn {
        Insn::new(CLASS_JMP | OP_JGT | SRC_X, dst, src, off, 0)
    }

    /// `if (u32)dst != (u32)imm goto +off`: a 32-bit comparison, so that an immediate with its
    /// top bit set is not sign-extended against a zero-extended load.
    pub fn jne32_imm(dst: Reg, imm: i32, off: i16) -> Insn {
        Insn::new(CLASS_JMP32 | OP_JNE | SRC_K, dst, R0, off, imm)
    }

    /// Calls kernel helper number `helper`; arguments in `R1`..`R5`, result in `R0`.
    pub fn call(helper: i32) -> Insn {
        Insn::new(CLASS_JMP | OP_CALL, R0, R0, 0, helper)
    }

    /// Returns `R0`.
    pub fn exit() -> Insn {
        Insn::new(CLASS_JMP | OP_EXIT, R0, R0, 0, 0)
    }

    /// `dst = map`: the two-slot 64-bit immediate load of a map's descriptor.
    pub fn ld_map_fd(dst: Reg, map: RawFd) -> [Insn; 2] {
        [
            Insn::new(CLASS_LD | MODE_IMM | SIZE_DW, dst, Reg(PSEUDO_MAP_FD), 0, map),
            Insn::new(0, R0, R0, 0, 0),
        ]
    }

    /// The eight bytes the kernel reads.
    #[cfg(test)]
    pub fn to_bytes(self) -> [u8; 8] {
        let mut bytes = [0; 8];
        bytes[0] = self.code;
        bytes[1] = self.regs;
        bytes[2..4].copy_from_slice(&self.off.to_ne_bytes());
        bytes[4..].copy_from_slice(&self.imm.to_ne_bytes());
        bytes
    }

    /// Whether this is a jump whose offset a [`Label`] fills in.
    fn is_jump(self) -> bool {
        matches!(self.code & 0x07, CLASS_JMP | CLASS_JMP32) && !matches!(self.code & 0xf0, OP_CALL | OP_EXIT)
    }
}

/// A place in a program that jumps lead to, bound once its position is known.
#[derive(Clone, Copy, Debug)]
pub struct Label(usize);

/// A program under construction, with forward jumps to labels resolved when it is finished,
/// so that no jump offset is counted by hand.
#[derive(Debug, Default)]
pub struct Asm {
    insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    jumps: Vec<(usize, Label)>,
}

impl Asm {
    /// An empty program.
    pub fn new() -> Asm {
        Asm::default()
    }

    /// A label to jump to, bound later with [`Asm::bind`].
    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// Places `label` at the next instruction.
    pub fn bind(&mut self, label: Label) {
        self.labels[label.0] = Some(self.insns.len());
    }

    /// Appends instructions.
    pub fn push(&mut self, insns: &[Insn]) {
        self.insns.extend_from_slice(insns);
    }

    /// Appends the jump `insn`, its offset to be that of `to`.
    pub fn jump(&mut self, insn: Insn, to: Label) {
        debug_assert!(insn.is_jump(), "{insn:?} is not a jump");
        self.jumps.push((self.insns.len(), to));
        self.insns.push(insn);
    }

    /// The instructions, with every jump's offset counted from the instruction after it.
    ///
    /// Panics when a label was never bound or a jump is out of a 16-bit offset's reach: both
    /// are mistakes in the code building the program, not conditions of the system.
    pub fn finish(mut self) -> Vec<Insn> {
        for (at, label) in self.jumps {
            let target = self.labels[label.0].expect("every label jumped to is bound");
            let off = target as isize - (at as isize + 1);
            self.insns[at].off = i16::try_from(off).expect("jump within reach of a 16-bit offset");
        }
        self.insns
    }
}

/// Attributes of `BPF_MAP_CREATE`.
#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// Attributes of `BPF_MAP_UPDATE_ELEM`.
#[repr(C)]
#[derive(Default)]
struct MapUpdateAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// Attributes of `BPF_PROG_LOAD`.
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// Attributes of `BPF_LINK_CREATE`.
#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// Attributes of `BPF_PROG_TEST_RUN`.
#[cfg(test)]
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
}

/// Issues `cmd` with `attr`; the returned value is a new descriptor for the commands that
/// create an object, zero for the others.
fn bpf<T>(cmd: Cmd, attr: &mut T) -> io::Result<libc::c_long> {
    let size = libc::c_uint::try_from(std::mem::size_of::<T>()).expect("attributes are a few dozen bytes");
    // SAFETY: `attr` is a live, exclusively borrowed `repr(C)` block of `size` bytes laid out
    // as the leading fields of `union bpf_attr` for `cmd`; every pointer stored in it (by the
    // callers below) points to memory that outlives this call and is as large as the length
    // stored next to it. The kernel reads the block and writes only output fields inside it.
    let ret = unsafe { libc::syscall(libc::SYS_bpf, cmd as libc::c_int, attr as *mut T, size) };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ret)
}

/// Takes ownership of the descriptor a creating command returned.
fn owned(fd: libc::c_long) -> OwnedFd {
    let fd = RawFd::try_from(fd).expect("descriptors fit in an int");
    // SAFETY: `fd` was just returned by the kernel as a new descriptor of this process, which
    // nothing else owns; the kernel creates BPF object descriptors close-on-exec.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// A NUL-terminated object name of at most 15 characters, as the kernel shows in `bpftool`.
fn object_name(name: &str) -> [u8; 16] {
    let mut out = [0; 16];
    let len = name.len().min(15);
    out[..len].copy_from_slice(&name.as_bytes()[..len]);
    out
}

/// Creates a map of `map_type` with `u32` keys and values and `entries` entries.
pub fn map_create(map_type: u32, entries: u32, name: &str) -> io::Result<OwnedFd> {
    let mut attr = MapCreateAttr {
        map_type,
        key_size: 4,
        value_size: 4,
        max_entries: entries,
        map_name: object_name(name),
        ..MapCreateAttr::default()
    };
    bpf(Cmd::MapCreate, &mut attr).map(owned)
}

/// Sets `map[key] = value` for a map of `u32` keys and values, creating or replacing the entry.
pub fn map_update(map: BorrowedFd<'_>, key: u32, value: u32) -> io::Result<()> {
    let mut attr = MapUpdateAttr {
        map_fd: fd_u32(map.as_raw_fd()),
        key: &key as *const u32 as u64,
        value: &value as *const u32 as u64,
        ..MapUpdateAttr::default()
    };
    bpf(Cmd::MapUpdateElem, &mut attr).map(drop)
}

/// Why the kernel refused a program.
#[derive(Debug)]
pub enum LoadError {
    /// The caller lacks the capability to load programs.
    NoPermission,
    /// The verifier rejected the program; its explanation.
    Rejected(String),
}

/// Loads `insns` as an XDP program. On refusal it loads again with the verifier's log
/// enabled, so that the log is only produced when there is something to read in it.
pub fn prog_load_xdp(insns: &[Insn], name: &str) -> Result<OwnedFd, LoadError> {
    const LICENSE: &[u8] = b"Dual MIT/GPL\0";
    let mut attr = ProgLoadAttr {
        prog_type: PROG_TYPE_XDP,
        insn_cnt: u32::try_from(insns.len()).expect("a program of fewer than 2^32 instructions"),
        insns: insns.as_ptr() as u64,
        license: LICENSE.as_ptr() as u64,
        prog_name: object_name(name),
        expected_attach_type: ATTACH_TYPE_XDP,
        ..ProgLoadAttr::default()
    };
    let first = match bpf(Cmd::ProgLoad, &mut attr) {
        Ok(fd) => return Ok(owned(fd)),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => return Err(LoadError::NoPermission),
        Err(e) => e,
    };
    let mut log = vec![0u8; LOG_SIZE];
    attr.log_level = 1;
    attr.log_size = LOG_SIZE as u32;
    attr.log_buf = log.as_mut_ptr() as u64;
    match bpf(Cmd::ProgLoad, &mut attr) {
        // Refused once and accepted the second time: nothing to explain.
        Ok(fd) => Ok(owned(fd)),
        Err(e) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]).trim_end().to_owned();
            Err(LoadError::Rejected(if text.is_empty() {
                format!("{first} (the verifier logged nothing; with the log: {e})")
            } else {
                text
            }))
        }
    }
}

/// Links the XDP program `prog` to the interface `ifindex` with the `XDP_FLAGS_*` `flags`.
/// The attachment lasts as long as the returned link descriptor (and any copy of it).
pub fn link_create_xdp(prog: BorrowedFd<'_>, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut attr = LinkCreateAttr {
        prog_fd: fd_u32(prog.as_raw_fd()),
        target_ifindex: ifindex,
        attach_type: ATTACH_TYPE_XDP,
        flags,
    };
    bpf(Cmd::LinkCreate, &mut attr).map(owned)
}

/// Runs the XDP program `prog` once on the packet `data` without a network device, and
/// returns the action it chose.
#[cfg(test)]
pub fn test_run(prog: BorrowedFd<'_>, data: &[u8]) -> io::Result<u32> {
    let mut out = vec![0u8; data.len() + 256];
    let mut attr = TestRunAttr {
        prog_fd: fd_u32(prog.as_raw_fd()),
        data_size_in: u32::try_from(data.len()).expect("a test packet under 4 GiB"),
        data_size_out: u32::try_from(out.len()).expect("a test packet under 4 GiB"),
        data_in: data.as_ptr() as u64,
        data_out: out.as_mut_ptr() as u64,
        repeat: 1,
        ..TestRunAttr::default()
    };
    bpf(Cmd::ProgTestRun, &mut attr)?;
    Ok(attr.retval)
}

/// A descriptor as the kernel's attributes carry it; descriptors are never negative.
fn fd_u32(fd: RawFd) -> u32 {
    u32::try_from(fd).expect("a valid descriptor is not negative")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(insn: Insn) -> [u8; 8] {
        insn.to_bytes()
    }

    #[test]
    fn attribute_blocks_match_the_kernel_layout() {
        use std::mem::{offset_of, size_of};
        assert_eq!(offset_of!(MapCreateAttr, map_name), 28);
        assert_eq!(size_of::<MapCreateAttr>(), 44);
        assert_eq!(offset_of!(MapUpdateAttr, key), 8);
        assert_eq!(offset_of!(MapUpdateAttr, flags), 24);
        assert_eq!(offset_of!(ProgLoadAttr, log_buf), 32);
        assert_eq!(offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(offset_of!(ProgLoadAttr, expected_attach_type), 68);
        assert_eq!(offset_of!(LinkCreateAttr, flags), 12);
        assert_eq!(offset_of!(TestRunAttr, data_in), 16);
        assert_eq!(offset_of!(TestRunAttr, duration), 36);
        assert_eq!(size_of::<Insn>(), 8);
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn instructions_encode_as_the_kernel_reads_them() {
        // Reference encodings as `llvm-objdump -d` prints them for the same instructions.
        assert_eq!(bytes(Insn::ldx_w(R2, R1, 0)), [0x61, 0x12, 0, 0, 0, 0, 0, 0]);
        assert_eq!(bytes(Insn::ldx_w(R3, R1, 4)), [0x61, 0x13, 4, 0, 0, 0, 0, 0]);
        assert_eq!(bytes(Insn::ldx_h(R5, R2, 12)), [0x69, 0x25, 12, 0, 0, 0, 0, 0]);
        assert_eq!(bytes(Insn::ldx_b(R5, R2, 23)), [0x71, 0x25, 23, 0, 0, 0, 0, 0]);
        assert_eq!(bytes(Insn::mov64_reg(R4, R2)), [0xbf, 0x24, 0, 0, 0, 0, 0, 0]);
        assert_eq!(bytes(Insn::mov64_imm(R0, 2)), [0xb7, 0x00, 0, 0, 2, 0, 0, 0]);
        assert_eq!(bytes(Insn::add64_imm(R4, 42)), [0x07, 0x04, 0, 0, 42, 0, 0, 0]);
        assert_eq!(bytes(Insn::and32_imm(R5, 0xf0)), [0x54, 0x05, 0, 0, 0xf0, 0, 0, 0]);
        assert_eq!(bytes(Insn::jgt_reg(R4, R3, 7)), [0x2d, 0x34, 7, 0, 0, 0, 0, 0]);
        assert_eq!(
            bytes(Insn::jne32_imm(R5, -2, 3)),
            [0x56, 0x05, 3, 0, 0xfe, 0xff, 0xff, 0xff]
        );
        assert_eq!(bytes(Insn::jne32_imm(R5, 0, -1)), [0x56, 0x05, 0xff, 0xff, 0, 0, 0, 0]);
        assert_eq!(bytes(Insn::call(51)), [0x85, 0x00, 0, 0, 51, 0, 0, 0]);
        assert_eq!(bytes(Insn::exit()), [0x95, 0, 0, 0, 0, 0, 0, 0]);
        let [lo, hi] = Insn::ld_map_fd(R1, 5);
        assert_eq!(bytes(lo), [0x18, 0x11, 0, 0, 5, 0, 0, 0]);
        assert_eq!(bytes(hi), [0; 8]);
    }

    #[test]
    fn jumps_count_from_the_next_instruction() {
        let mut asm = Asm::new();
        let end = asm.label();
        let start = asm.label();
        asm.bind(start);
        asm.jump(Insn::jne32_imm(R5, 1, 0), end); // 0: skips 1 and 2
        asm.push(&[Insn::mov64_imm(R0, 1)]); // 1
        asm.jump(Insn::jne32_imm(R5, 2, 0), start); // 2: back to 0
        asm.bind(end);
        asm.push(&[Insn::exit()]); // 3
        let insns = asm.finish();
        assert_eq!(insns[0].off, 2);
        assert_eq!(insns[2].off, -3);
        assert_eq!(insns[3].off, 0);
    }

    #[test]
    fn object_names_are_cut_and_terminated() {
        assert_eq!(&object_name("skyline")[..8], b"skyline\0");
        let long = object_name("a_name_longer_than_fifteen");
        assert_eq!(long[15], 0);
        assert_eq!(&long[..15], b"a_name_longer_t");
    }
}
