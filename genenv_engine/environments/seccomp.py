"""The seccomp filter of a `genenv_engine.environments.sandbox` worker: syscall tables, the classic BPF program and
its installation.

Provides `filter_program` (the program for one machine and one worker pid, as bytes), `install` (loads it into the
calling process with ``PR_SET_NO_NEW_PRIVS`` and ``seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC)``,
through libc by ctypes), `evaluate` (runs a program on one syscall, for tests and doctests) and the tables behind
them: `SYSCALLS` (numbers on x86_64 and aarch64), `DENIED` (always refused), `NOSYS` (answered ``ENOSYS`` so that
glibc and Python fall back to an older call). The program allows every syscall it does not name; it refuses, with
``EPERM``: every way to start a process, run a program, open a socket, signal another process, trace or read
another process, change the filesystem (create, write, remove, rename, link, chmod, chown, truncate, utime,
xattr), lock a file (``flock``, ``fcntl`` locks and leases), mount or change namespace, load code into the kernel,
and raise a resource limit. ``open``/``openat`` are refused when their flags ask for writing, creating, truncating
or appending; ``clone`` only when it does not make a thread; ``kill``/``tgkill``/``tkill`` and the ``sigqueue`` calls
unless they target the worker itself. A syscall of another architecture kills the process; an x32 syscall, or a
number past the newest in the tables, is refused. Nothing runs at import: ctypes loads libc on the first `libc`.

>>> program = filter_program("x86_64", pid=4321)
>>> [evaluate(program, "x86_64", SYSCALLS[name][0], args) for name, args in
...  [("read", ()), ("socket", (2, 1, 0)), ("clone3", ()), ("openat", (-100, 0, 0o101)), ("openat", (-100, 0, 0))]]
['allow', 'errno EPERM', 'errno ENOSYS', 'errno EPERM', 'allow']
"""

from __future__ import annotations

import errno
import functools
import struct
from collections.abc import Sequence
from typing import Any

# Syscall numbers, name: (x86_64, aarch64). x86_64 from /usr/include/x86_64-linux-gnu/asm/unistd_64.h; aarch64
# uses the generic table, /usr/include/asm-generic/unistd.h (it has no open, fork, mkdir, ...: None). Numbers from
# 424 on are shared by every architecture; those past the Linux 6.1 headers (fchmodat2 452 to file_setattr 469)
# are from the kernel's scripts/syscall.tbl.
SYSCALLS: dict[str, tuple[int | None, int | None]] = {
    "read": (0, 63),
    "write": (1, 64),
    "open": (2, None),
    "openat": (257, 56),
    "creat": (85, None),
    "ioctl": (16, 29),
    "fcntl": (72, 25),
    "flock": (73, 32),
    "openat2": (437, 437),
    # processes and programs
    "clone": (56, 220),
    "fork": (57, None),
    "vfork": (58, None),
    "clone3": (435, 435),
    "execve": (59, 221),
    "execveat": (322, 281),
    # sockets
    "socket": (41, 198),
    "socketpair": (53, 199),
    "connect": (42, 203),
    "bind": (49, 200),
    "listen": (50, 201),
    "accept": (43, 202),
    "accept4": (288, 242),
    "sendto": (44, 206),
    "sendmsg": (46, 211),
    "sendmmsg": (307, 269),
    # signals and other processes
    "kill": (62, 129),
    "tkill": (200, 130),
    "tgkill": (234, 131),
    "rt_sigqueueinfo": (129, 138),
    "rt_tgsigqueueinfo": (297, 240),
    "pidfd_open": (434, 434),
    "pidfd_getfd": (438, 438),
    "pidfd_send_signal": (424, 424),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "process_madvise": (440, 440),
    "migrate_pages": (256, 238),
    "move_pages": (279, 239),
    "kcmp": (312, 272),
    "setpriority": (141, 140),
    "ioprio_set": (251, 30),
    "sched_setaffinity": (203, 122),
    "sched_setscheduler": (144, 119),
    "sched_setparam": (142, 118),
    "sched_setattr": (314, 274),
    # the filesystem
    "unlink": (87, None),
    "unlinkat": (263, 35),
    "rename": (82, None),
    "renameat": (264, 38),
    "renameat2": (316, 276),
    "mkdir": (83, None),
    "mkdirat": (258, 34),
    "rmdir": (84, None),
    "link": (86, None),
    "linkat": (265, 37),
    "symlink": (88, None),
    "symlinkat": (266, 36),
    "chmod": (90, None),
    "fchmod": (91, 52),
    "fchmodat": (268, 53),
    "fchmodat2": (452, 452),
    "chown": (92, None),
    "fchown": (93, 55),
    "fchownat": (260, 54),
    "lchown": (94, None),
    "truncate": (76, 45),
    "ftruncate": (77, 46),
    "fallocate": (285, 47),
    "mknod": (133, None),
    "mknodat": (259, 33),
    "utime": (132, None),
    "utimes": (235, None),
    "utimensat": (280, 88),
    "futimesat": (261, None),
    "setxattr": (188, 5),
    "lsetxattr": (189, 6),
    "fsetxattr": (190, 7),
    "removexattr": (197, 14),
    "lremovexattr": (198, 15),
    "fremovexattr": (199, 16),
    "setxattrat": (463, 463),
    "removexattrat": (466, 466),
    "file_setattr": (469, 469),
    "open_by_handle_at": (304, 265),
    "name_to_handle_at": (303, 264),
    "memfd_create": (319, 279),
    # mounts and namespaces
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "setns": (308, 268),
    "unshare": (272, 97),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "open_tree_attr": (467, 467),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    # the kernel and the machine
    "bpf": (321, 280),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "perf_event_open": (298, 241),
    "fanotify_init": (300, 262),
    "reboot": (169, 142),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "sethostname": (170, 161),
    "setdomainname": (171, 162),
    "acct": (163, 89),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "clock_adjtime": (305, 266),
    "adjtimex": (159, 171),
    "iopl": (172, None),
    "ioperm": (173, None),
    "syslog": (103, 116),
    "add_key": (248, 217),
    "keyctl": (250, 219),
    "request_key": (249, 218),
    # resource limits (prlimit64 only when it sets one: glibc's getrlimit is prlimit64 with no new limit)
    "setrlimit": (160, 164),
    "prlimit64": (302, 261),
    "seccomp": (317, 277),
}

MACHINES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}
"""``platform.machine()``: (its column of `SYSCALLS`, its ``AUDIT_ARCH_*``)."""

FIRST_UNKNOWN = 471
"""The first syscall number past the tables (``listns``, 470, is the newest there); from it on: ``ENOSYS``."""

NOSYS = ("clone3", "openat2")
"""Answered ``ENOSYS``, as by an older kernel: glibc then starts threads with ``clone``, Python opens with
``openat``, and the filter can read their flags (clone3 and openat2 take them in a struct it cannot see)."""

DENIED = (
    "fork",
    "vfork",
    "execve",
    "execveat",
    "socket",
    "socketpair",
    "connect",
    "bind",
    "listen",
    "accept",
    "accept4",
    "sendto",
    "sendmsg",
    "sendmmsg",
    "pidfd_open",
    "pidfd_getfd",
    "pidfd_send_signal",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "process_madvise",
    "migrate_pages",
    "move_pages",
    "kcmp",
    "setpriority",
    "ioprio_set",
    "sched_setscheduler",
    "sched_setparam",
    "sched_setattr",
    "creat",
    "unlink",
    "unlinkat",
    "rename",
    "renameat",
    "renameat2",
    "mkdir",
    "mkdirat",
    "rmdir",
    "link",
    "linkat",
    "symlink",
    "symlinkat",
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchown",
    "fchownat",
    "lchown",
    "truncate",
    "ftruncate",
    "fallocate",
    "mknod",
    "mknodat",
    "utime",
    "utimes",
    "utimensat",
    "futimesat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "setxattrat",
    "removexattrat",
    "file_setattr",
    "open_by_handle_at",
    "name_to_handle_at",
    "memfd_create",
    "flock",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "setns",
    "unshare",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "open_tree_attr",
    "quotactl",
    "quotactl_fd",
    "bpf",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "perf_event_open",
    "fanotify_init",
    "reboot",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "swapon",
    "swapoff",
    "sethostname",
    "setdomainname",
    "acct",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "iopl",
    "ioperm",
    "syslog",
    "add_key",
    "keyctl",
    "request_key",
    "setrlimit",
)
"""Refused with ``EPERM`` whatever their arguments (those a machine lacks are left out there)."""

SELF_ONLY = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
"""Allowed only when their first argument (the pid or thread group) is the worker's own pid."""

CLONE_THREAD = 0x10000
WRITE_FLAGS = 0o1 | 0o2 | 0o100 | 0o1000 | 0o2000
"""O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND (the same on x86_64 and aarch64; O_TMPFILE needs a write
mode, so it is refused too)."""

IOCTL_DENIED = (0x5412, 0x541C, 0x541D, 0x540E, 0x5423, 0x40086602, 0x40046602, 0x401C5820)
"""ioctl requests refused on any file: TIOCSTI and TIOCLINUX (type into a terminal), TIOCCONS, TIOCSCTTY,
TIOCSETD, FS_IOC_SETFLAGS (64- and 32-bit: chattr, e.g. immutable, on a file opened read-only) and
FS_IOC_FSSETXATTR."""

FCNTL_DENIED = (6, 7, 37, 38, 1024, 8, 15, 10)
"""fcntl commands refused: F_SETLK, F_SETLKW, F_OFD_SETLK, F_OFD_SETLKW, F_SETLEASE (a read lock or lease on a
file opened read-only would block the parent's writer), F_SETOWN, F_SETOWN_EX, F_SETSIG (SIGIO to another
process)."""

ALLOW, KILL_PROCESS, ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
NR, ARCH = 0, 4  # offsets in struct seccomp_data; args[i] at 16 + 8 * i (its low 32 bits first: little-endian)
LD_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_J*|BPF_K, BPF_RET|BPF_K
PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG = 38, 1
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 1, 1

Instruction = tuple[int, int, int, int]


def _load(offset: int) -> Instruction:
    return (LD_ABS, 0, 0, offset)


def _arg(index: int, high: bool = False) -> Instruction:
    return _load(16 + 8 * index + (4 if high else 0))


def _ret(action: int) -> Instruction:
    return (RET, 0, 0, action)


def _only_self(pid: int, refuse: Instruction) -> list[Instruction]:
    return [_arg(0), (JEQ, 0, 1, pid), _ret(ALLOW), refuse]


def _refuse_values(index: int, values: Sequence[int], refuse: Instruction) -> list[Instruction]:
    n = len(values)
    return [_arg(index), *[(JEQ, n - j, 0, value) for j, value in enumerate(values)], _ret(ALLOW), refuse]


def _rules(pid: int, nr: dict[str, int]) -> list[tuple[str, list[Instruction]]]:
    """Each named syscall with the instructions that decide it (every path of which returns)."""
    eperm, enosys = _ret(ERRNO | errno.EPERM), _ret(ERRNO | errno.ENOSYS)
    rules = [(name, [enosys]) for name in NOSYS] + [(name, [eperm]) for name in DENIED]
    rules += [(name, _only_self(pid, eperm)) for name in SELF_ONLY]
    rules += [
        ("clone", [_arg(0), (JSET, 0, 1, CLONE_THREAD), _ret(ALLOW), eperm]),
        ("open", [_arg(1), (JSET, 0, 1, WRITE_FLAGS), eperm, _ret(ALLOW)]),
        ("openat", [_arg(2), (JSET, 0, 1, WRITE_FLAGS), eperm, _ret(ALLOW)]),
        ("ioctl", _refuse_values(1, IOCTL_DENIED, eperm)),
        ("fcntl", _refuse_values(1, FCNTL_DENIED, eperm)),
        # a new limit (args[2] not NULL) is refused; reading one is not
        ("prlimit64", [_arg(2), (JEQ, 0, 3, 0), _arg(2, high=True), (JEQ, 0, 1, 0), _ret(ALLOW), eperm]),
        ("sched_setaffinity", [_arg(0), (JEQ, 1, 0, 0), (JEQ, 0, 1, pid), _ret(ALLOW), eperm]),
    ]
    return [(name, block) for name, block in rules if name in nr]


def filter_program(machine: str, pid: int) -> bytes:
    """The filter for a worker with process id ``pid`` on ``machine`` (a key of `MACHINES`): packed
    ``struct sock_filter`` entries, 8 bytes each, in native byte order.

    >>> program = filter_program("aarch64", pid=77)
    >>> len(program) % 8, len(program) // 8 < 4096
    (0, True)
    >>> [evaluate(program, "aarch64", 220, (flags,)) for flags in (0x11, 0x3D0F00)]  # fork's clone; a thread
    ['errno EPERM', 'allow']
    """
    column, audit_arch = MACHINES[machine]
    nr = {name: numbers[column] for name, numbers in SYSCALLS.items() if numbers[column] is not None}
    eperm = _ret(ERRNO | errno.EPERM)
    code: list[Instruction] = [
        _load(ARCH),
        (JEQ, 1, 0, audit_arch),
        _ret(KILL_PROCESS),
        _load(NR),
        (JGE, 0, 1, 0x40000000),
        eperm,  # the x32 ABI's bit
        (JGE, 0, 1, FIRST_UNKNOWN),
        _ret(ERRNO | errno.ENOSYS),
    ]
    for name, block in _rules(pid, nr):
        code += [(JEQ, 0, len(block), nr[name]), *block]
    code.append(_ret(ALLOW))
    if len(code) > 4096 or any(max(jt, jf) > 255 for _, jt, jf, _ in code):
        raise ValueError("the filter does not fit classic BPF")
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in code)


def evaluate(program: bytes, machine: str, number: int, args: Sequence[int] = (), arch: int | None = None) -> str:
    """What ``program`` answers syscall ``number`` with ``args`` (missing ones 0) from architecture ``arch``
    (default: ``machine``'s): ``allow``, ``kill`` or ``errno NAME``. Interprets only the instructions
    `filter_program` writes.

    >>> program = filter_program("x86_64", pid=9)
    >>> [evaluate(program, "x86_64", 62, (pid, 15)) for pid in (9, 8, 0, -1)]  # kill
    ['allow', 'errno EPERM', 'errno EPERM', 'errno EPERM']
    >>> evaluate(program, "x86_64", 0, arch=0x40000003), evaluate(program, "x86_64", 0x40000000 + 2)
    ('kill', 'errno EPERM')
    """
    data = struct.pack("<iI", number, MACHINES[machine][1] if arch is None else arch) + bytes(8)
    data += b"".join(struct.pack("<Q", value & 0xFFFFFFFFFFFFFFFF) for value in (*args, 0, 0, 0, 0, 0, 0)[:6])
    code = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    pc, accumulator = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == RET:
            action = k & 0xFFFF0000
            if action == ERRNO:
                return f"errno {errno.errorcode[k & 0xFFFF]}"
            return {ALLOW: "allow", KILL_PROCESS: "kill"}[action]
        if op == LD_ABS:
            accumulator, pc = struct.unpack_from("<I", data, k)[0], pc + 1
        else:
            taken = {JEQ: accumulator == k, JGE: accumulator >= k, JSET: bool(accumulator & k)}[op]
            pc += 1 + (jt if taken else jf)


@functools.cache
def libc() -> Any:
    """The C library, by ctypes (loaded on the first call; a worker inherits it loaded)."""
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def install(program: bytes, machine: str) -> None:
    """Load ``program`` into this process for good (all its threads): no new privileges, then the filter. Raises
    OSError when the kernel refuses either."""
    import ctypes

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    c, long = libc(), ctypes.c_ulong  # prctl and syscall are variadic: pass every argument at full width
    if c.prctl(long(PR_SET_NO_NEW_PRIVS), long(1), long(0), long(0), long(0)) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    number = SYSCALLS["seccomp"][MACHINES[machine][0]]
    if (
        c.syscall(long(number), long(SECCOMP_SET_MODE_FILTER), long(SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(fprog))
        != 0
    ):
        raise OSError(ctypes.get_errno(), "seccomp(SECCOMP_SET_MODE_FILTER) failed")


def die_with_parent(signal_number: int) -> None:
    """Have the kernel send ``signal_number`` to this process when the thread that forked it ends."""
    import ctypes

    long = ctypes.c_ulong
    libc().prctl(long(PR_SET_PDEATHSIG), long(signal_number), long(0), long(0), long(0))
