"""Classic-BPF seccomp filters read back from a live process (escape-probe seccomp_dump),
evaluated here for any system call and arguments: what a sandbox's filter returns for
each call, without trusting the sandbox's own description of it. Used by
test_sandbox_escape.py and tests/sandbox/reference_table.py. Standard library only.

A filter is a list of (code, jt, jf, k) instructions; a process's filters are all run
and the most restrictive action wins (seccomp(2))."""

import struct

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_I386 = 0x40000003
AUDIT_ARCH_AARCH64 = 0xC00000B7
X32_SYSCALL_BIT = 0x40000000

RET_KILL_PROCESS = 0x80000000
RET_KILL_THREAD = 0x00000000
RET_TRAP = 0x00030000
RET_ERRNO = 0x00050000
RET_USER_NOTIF = 0x7FC00000
RET_TRACE = 0x7FF00000
RET_LOG = 0x7FFC0000
RET_ALLOW = 0x7FFF0000
ACTION_FULL = 0xFFFF0000

# Precedence (seccomp(2)): the lowest-ranked action of all filters applies.
_RANK = [RET_KILL_PROCESS, RET_KILL_THREAD, RET_TRAP, RET_ERRNO, RET_USER_NOTIF, RET_TRACE,
         RET_LOG, RET_ALLOW]


def parse_hex(hexstr):
    """escape-probe's dump (16 hex digits per instruction) -> [(code, jt, jf, k)]."""
    out = []
    for i in range(0, len(hexstr), 16):
        w = hexstr[i:i + 16]
        out.append((int(w[0:4], 16), int(w[4:6], 16), int(w[6:8], 16), int(w[8:16], 16)))
    return out


def seccomp_data(nr, arch=AUDIT_ARCH_X86_64, args=(), ip=0):
    a = list(args) + [0] * (6 - len(args))
    return struct.pack("<iIQ6Q", nr, arch, ip, *[x & 0xFFFFFFFFFFFFFFFF for x in a])


def run(prog, data):
    """Run one filter over a packed seccomp_data; returns the 32-bit action value."""
    A = X = 0
    mem = [0] * 16
    pc = 0
    n = len(prog)
    while pc < n:
        code, jt, jf, k = prog[pc]
        cls = code & 0x07
        if cls == 0x00:  # BPF_LD
            mode, size = code & 0xE0, code & 0x18
            if mode == 0x20 and size == 0x00:  # ABS, W
                A = struct.unpack_from("<I", data, k)[0]
            elif mode == 0x00:  # IMM
                A = k
            elif mode == 0x60:  # MEM
                A = mem[k]
            elif mode == 0x80:  # LEN
                A = len(data)
            else:
                raise ValueError("unsupported ld %#x at %d" % (code, pc))
        elif cls == 0x01:  # BPF_LDX
            mode = code & 0xE0
            X = k if mode == 0x00 else mem[k] if mode == 0x60 else len(data)
        elif cls == 0x02:  # BPF_ST
            mem[k] = A
        elif cls == 0x03:  # BPF_STX
            mem[k] = X
        elif cls == 0x04:  # BPF_ALU
            op, src = code & 0xF0, (X if code & 0x08 else k)
            if op == 0x00:
                A = A + src
            elif op == 0x10:
                A = A - src
            elif op == 0x20:
                A = A * src
            elif op == 0x30:
                A = A // src if src else 0
            elif op == 0x40:
                A = A | src
            elif op == 0x50:
                A = A & src
            elif op == 0x60:
                A = A << src
            elif op == 0x70:
                A = A >> src
            elif op == 0x80:
                A = -A
            elif op == 0x90:
                A = A % src if src else 0
            elif op == 0xA0:
                A = A ^ src
            else:
                raise ValueError("unsupported alu %#x at %d" % (code, pc))
            A &= 0xFFFFFFFF
        elif cls == 0x05:  # BPF_JMP
            op, src = code & 0xF0, (X if code & 0x08 else k)
            if op == 0x00:  # JA
                pc += 1 + k
                continue
            if op == 0x10:
                cond = A == src
            elif op == 0x20:
                cond = A > src
            elif op == 0x30:
                cond = A >= src
            elif op == 0x40:
                cond = (A & src) != 0
            else:
                raise ValueError("unsupported jmp %#x at %d" % (code, pc))
            pc += 1 + (jt if cond else jf)
            continue
        elif cls == 0x06:  # BPF_RET
            return A if code & 0x18 == 0x10 else k
        elif cls == 0x07:  # BPF_MISC
            if code & 0xF8 == 0x00:
                X = A
            else:
                A = X
        pc += 1
    raise ValueError("filter fell off its end")


def combined(filters, nr, arch=AUDIT_ARCH_X86_64, args=()):
    """Action of every filter together (the most restrictive wins)."""
    data = seccomp_data(nr, arch, args)
    best = RET_ALLOW
    for prog in filters:
        act = run(prog, data)
        if _RANK.index(act & ACTION_FULL) < _RANK.index(best & ACTION_FULL):
            best = act
    return best


def describe(action):
    """'allow', 'errno EPERM', 'kill', ..."""
    import errno as _errno
    kind = action & ACTION_FULL
    if kind == RET_ALLOW:
        return "allow"
    if kind == RET_ERRNO:
        return "errno " + _errno.errorcode.get(action & 0xFFFF, str(action & 0xFFFF))
    return {RET_KILL_PROCESS: "kill process", RET_KILL_THREAD: "kill thread",
            RET_TRAP: "trap", RET_USER_NOTIF: "user notify", RET_TRACE: "trace",
            RET_LOG: "log"}[kind]


def denied(action):
    return action & ACTION_FULL != RET_ALLOW and action & ACTION_FULL != RET_LOG


_NAMES = None


def syscall_names():
    """{name: number} for x86_64, from the kernel headers (asm/unistd_64.h)."""
    global _NAMES
    if _NAMES is None:
        import re
        _NAMES = {}
        for path in ("/usr/include/x86_64-linux-gnu/asm/unistd_64.h",
                     "/usr/include/asm/unistd_64.h"):
            try:
                with open(path) as f:
                    for line in f:
                        m = re.match(r"#define __NR_(\w+)\s+(\d+)", line)
                        if m:
                            _NAMES[m.group(1)] = int(m.group(2))
                break
            except OSError:
                continue
    return _NAMES
