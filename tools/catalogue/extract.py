#!/usr/bin/env python3
"""Extract the error and warning message templates an upstream project can print.

    extract.py PROJECT --repo GIT_DIR [--commit SHA]     a bare or normal git repository, read at SHA
    extract.py PROJECT --tree DIR --commit REF             an unpacked source tree (a release tarball), pinned by REF

Writes kb/_catalogue/PROJECT.tsv (docs/catalogues.md): one row per message call site, with the template
(placeholders in the uniform syntax below), its level, how it is printed, and where it is
(path:line@commit). Then tools/catalogue/classify.py gives every row its class.

Placeholders: <int> (an integer: %d %u %ld %zu, {x:d}), <hex> (%x %p, 0x...), <float> (%f %g %e, {x:.2f}),
<str> (%s, and any value whose type the source does not say: an f-string {expr}, a .format {}, a streamed
C++ value). Every other character is literal upstream text.

Stdlib only, so it runs anywhere the repository is. Which files and calls each project has is the
PROJECTS table below; the parsers are generic (C/C++ call arguments, C++ << streams, Python's ast).
"""
from __future__ import annotations

import argparse
import ast
import fnmatch
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

# --------------------------------------------------------------------------------------------------
# Projects. `files`: globs of paths to read; `c_calls`: C/C++ call name -> (level, form, marker, fmt_arg),
# where fmt_arg is the index of the format-string argument; `cpp_streams`: glog-style `LOG(LEVEL) <<`;
# `checks`: TORCH_CHECK-like macros (condition, then message pieces); `py`: Python rules; `help_txt`:
# Open MPI style help files. `form` is "line" when the template is the whole line as printed (the
# project's own level marker included) and "log" when a logging header with the level precedes it.
# --------------------------------------------------------------------------------------------------
PROJECTS: dict = {
    "nccl": {
        "source": "https://github.com/NVIDIA/nccl",
        "files": ["src/*.cc", "src/*.cu", "src/*.h", "src/*.cpp"],
        "c_calls": {"WARN": ("warning", "line", "NCCL WARN ", 0)},
    },
    "pytorch": {
        "source": "https://github.com/pytorch/pytorch",
        "files": [
            "torch/csrc/distributed/c10d/*.cpp", "torch/csrc/distributed/c10d/*.hpp", "torch/csrc/distributed/c10d/*.h",
            "torch/distributed/*.py", "torch/utils/data/*.py", "c10/cuda/*.cpp", "c10/cuda/*.h",
            "torch/cuda/*.py", "torch/csrc/cuda/*.cpp", "torch/csrc/CudaIPCTypes.cpp", "torch/nn/parallel/*.py",
        ],
        "exclude": ["*/test/*", "*/testing/*", "*/_testing/*", "*/benchmarks/*"],
        "checks": {"TORCH_CHECK": 1, "TORCH_CHECK_WITH": 2, "TORCH_CHECK_VALUE": 1, "TORCH_CHECK_TYPE": 1,
                   "TORCH_CHECK_NOT_IMPLEMENTED": 1, "C10_CUDA_CHECK_WARN": None},
        "throws": {"C10_THROW_ERROR": 1, "TORCH_WARN": 0, "TORCH_WARN_ONCE": 0, "C10D_ERROR": 0, "C10D_WARNING": 0},
        "cpp_streams": True,
        "py": True,
    },
    "deepspeed": {
        "source": "https://github.com/microsoft/DeepSpeed",
        # DeepSpeed logs its step, overflow and loss-scale messages at INFO: they are what a healthy fp16 run
        # prints, and what tells a skipped step from a failed one.
        "py_info": True,
        "files": ["deepspeed/runtime/*.py", "deepspeed/launcher/*.py", "deepspeed/comm/*.py", "deepspeed/utils/*.py",
                  "deepspeed/elasticity/*.py", "deepspeed/checkpoint/*.py", "deepspeed/accelerator/*.py", "deepspeed/*.py"],
        "py": True,
    },
    "megatron": {
        "source": "https://github.com/NVIDIA/Megatron-LM",
        "files": ["megatron/*.py"],
        "exclude": ["*/tests/*"],
        "py": True,
    },
    "accelerate": {
        "source": "https://github.com/huggingface/accelerate",
        "files": ["src/accelerate/*.py"],
        "exclude": ["*/test_utils/*"],
        "py": True,
    },
    "transformers": {
        "source": "https://github.com/huggingface/transformers",
        # Read from an installed tree (site-packages): the paths are those under src/ upstream.
        "files": ["transformers/trainer*.py", "transformers/training_args.py", "transformers/integrations/*.py",
                  "transformers/modeling_utils.py", "transformers/data/*.py", "transformers/optimization.py"],
        "py": True,
    },
    "lightning": {
        "source": "https://github.com/Lightning-AI/pytorch-lightning",
        "files": ["src/lightning/fabric/*.py", "src/lightning/pytorch/*.py"],
        "py": True,
    },
    "horovod": {
        "source": "https://github.com/horovod/horovod",
        "files": ["horovod/*.py", "horovod/common/*.cc", "horovod/common/*.h", "horovod/torch/*.cc"],
        "exclude": ["*/test/*"],
        "cpp_streams": True,
        "py": True,
    },
    "ompi": {
        "source": "https://github.com/open-mpi/ompi",
        "files": ["*help-*.txt"],
        "help_txt": True,
    },
    "prrte": {
        "source": "https://github.com/openpmix/prrte",
        "files": ["*help-*.txt"],
        "help_txt": True,
    },
    "slurm": {
        "source": "https://github.com/SchedMD/slurm",
        "files": ["src/srun/*.c", "src/slurmd/slurmstepd/*.c", "src/sbatch/*.c", "src/plugins/task/*.c",
                  "src/plugins/cgroup/*.c", "src/plugins/mpi/*.c", "src/plugins/switch/*.c", "src/plugins/job_container/*.c",
                  "src/plugins/prep/*.c", "src/plugins/gres/gpu/*.c", "src/api/step_launch.c", "src/common/env.c"],
        # Slurm's log.c puts "error: " / "fatal: " / "warning: " before the message; the client's name
        # ("srun: ", "slurmstepd: ") before that is a launcher prefix, added by the synthesis.
        "c_calls": {"error": ("error", "line", "error: ", 0), "fatal": ("fatal", "line", "fatal: ", 0),
                    "warning": ("warning", "line", "warning: ", 0), "info": ("info", "line", "", 0),
                    "fatal_abort": ("fatal", "line", "fatal: ", 0)},
    },
    "ucx": {
        "source": "https://github.com/openucx/ucx",
        "files": ["src/*.c", "src/*.h", "src/*.inl"],
        # UCS_LOG_METADATA_FMT "%17s:%-4u %-4s %-5s %*s" (src/ucs/debug/log.c): "UCX", then the level name.
        "c_calls": {"ucs_error": ("error", "line", "UCX  ERROR ", 0), "ucs_warn": ("warning", "line", "UCX  WARN  ", 0),
                    "ucs_fatal": ("fatal", "line", "UCX  FATAL ", 0)},
        # ucs_diag is left out: UCX prints it only with UCX_LOG_LEVEL=diag or finer (the default is warn).
    },
    "cuda-runtime": {
        "source": "libcudart (NVIDIA CUDA runtime), as shipped by Debian's libcudart11.0 package",
        "files": ["*libcudart.so.*.*.*"],  # the library itself, not its soname link
        "strings_table": True,
    },
    "linux": {
        "source": "https://git.kernel.org/pub/scm/linux/kernel/git/stable/linux.git",
        "files": ["mm/oom_kill.c", "kernel/hung_task.c", "kernel/watchdog.c", "drivers/edac/*.c", "drivers/pci/pcie/aer.c",
                  "drivers/nvme/host/*.c", "arch/x86/kernel/cpu/mce/*.c"],
        "c_calls": {n: (lvl, "log", "", 0) for n, lvl in [
            ("pr_err", "error"), ("pr_warn", "warning"), ("pr_crit", "error"), ("pr_emerg", "error"), ("pr_alert", "error"),
            ("pr_err_ratelimited", "error"), ("pr_warn_ratelimited", "warning"), ("pr_err_once", "error"),
            ("pr_warn_once", "warning"), ("pr_info", "info"), ("pr_cont", "info")]}
        | {n: (lvl, "log", "<str> <str>: ", 1) for n, lvl in [
            ("dev_err", "error"), ("dev_warn", "warning"), ("dev_crit", "error"), ("dev_emerg", "error"), ("dev_alert", "error"),
            ("dev_err_ratelimited", "error"), ("dev_warn_ratelimited", "warning"), ("dev_err_once", "error"),
            ("dev_warn_once", "warning"), ("dev_info", "info"),
            ("pci_err", "error"), ("pci_warn", "warning"), ("pci_crit", "error"), ("pci_info", "info"),
            ("edac_printk", "error"), ("edac_mc_printk", "error"), ("aer_printk", "error")]},
    },
}

# The same extraction for older releases: their wording is what older logs carry.
PROJECTS["pytorch-1.13"] = PROJECTS["pytorch"]
PROJECTS["nccl-2.18"] = PROJECTS["nccl"]
PROJECTS["nccl-2.7"] = PROJECTS["nccl"]

# Kernel printk wrappers whose first argument is a level, not the device: the format is one further on.
LEVEL_FIRST = {"edac_printk": 2, "edac_mc_printk": 2, "aer_printk": 2}


# --------------------------------------------------------------------------------------------------
# Reading the source
# --------------------------------------------------------------------------------------------------
class GitSource:
    def __init__(self, git_dir: str, commit: str | None):
        self.git_dir = git_dir
        self.commit = commit or self._git("rev-parse", "HEAD").strip()

    def _git(self, *args: str) -> str:
        return subprocess.run(["git", "--git-dir", self.git_dir, *args], check=True, capture_output=True, text=True,
                              errors="replace").stdout

    def paths(self) -> list[str]:
        return self._git("ls-tree", "-r", "--name-only", self.commit).splitlines()

    def read_many(self, paths: list[str]):
        """(path, text) for each path, through one `git cat-file --batch`."""
        proc = subprocess.Popen(["git", "--git-dir", self.git_dir, "cat-file", "--batch"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE)
        assert proc.stdin and proc.stdout
        for p in paths:
            proc.stdin.write(f"{self.commit}:{p}\n".encode())
            proc.stdin.flush()
            header = proc.stdout.readline().split()
            if len(header) < 3 or header[1] != b"blob":
                continue
            data = proc.stdout.read(int(header[2]))
            proc.stdout.read(1)
            yield p, data.decode("utf-8", errors="replace")
        proc.stdin.close()
        proc.wait()


class TreeSource:
    def __init__(self, root: str, commit: str):
        self.root, self.commit = root, commit

    def paths(self) -> list[str]:
        out = []
        for d, _, files in os.walk(self.root):
            for f in files:
                out.append(os.path.relpath(os.path.join(d, f), self.root).replace(os.sep, "/"))
        return sorted(out)

    def read_many(self, paths: list[str]):
        for p in paths:
            with open(os.path.join(self.root, p), encoding="utf-8", errors="replace") as f:
                yield p, f.read()


def selected(path: str, conf: dict) -> bool:
    if any(fnmatch.fnmatch(path, g) for g in conf.get("exclude", [])):
        return False
    return any(fnmatch.fnmatch(path, g) for g in conf["files"])


# --------------------------------------------------------------------------------------------------
# Placeholders
# --------------------------------------------------------------------------------------------------
PRINTF = re.compile(r"%(?:%|m|(?P<flags>[-+ #0']*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?"
                    r"(?P<len>hh|h|ll|l|L|q|j|z|Z|t|I64|I32|I)?(?P<conv>[diouxXeEfFgGaAcspn])(?P<ext>[A-Za-z]{0,2}))")
SLURM_P = {"pJ": "JobId=<int>", "pS": "StepId=<int>.<int>", "ps": "StepId=<int>.<int>", "pI": "<str>", "pA": "<str>", "pd": "<str>"}


def printf_to_template(fmt: str, slurm: bool = False, kernel: bool = False) -> str:
    out, i = [], 0
    for m in PRINTF.finditer(fmt):
        out.append(fmt[i:m.start()])
        i = m.end()
        tok = m.group(0)
        if tok == "%%":
            out.append("%")
            continue
        if tok == "%m":
            out.append("<str>")
            continue
        conv, ext = m.group("conv"), m.group("ext") or ""
        if conv == "p":
            key = "p" + ext[:1] if ext else "p"
            if slurm and ext:  # xstrfmt's %pJ (job), %pS / %ps (step), %pI ...: one letter
                out.append(SLURM_P.get(key, SLURM_P.get(key.upper(), "<str>")))
                i = m.start() + len(tok) - len(ext) + 1
                continue
            if kernel and ext:  # %pV %pI4 %pOF %pS ...: kernel pointer extensions print text
                out.append("<str>")
                continue
            out.append("<hex>")
            i = m.end() - len(ext)
            continue
        i = m.end() - len(ext)  # the extension letters were not part of the conversion
        if conv in "diouc" and conv != "c":
            out.append("<int>")
        elif conv in "xX":
            out.append("<hex>")
        elif conv in "eEfFgGaA":
            out.append("<float>")
        elif conv in "sc":
            out.append("<str>")
        else:
            out.append("<str>")
    out.append(fmt[i:])
    return "".join(out)


BRACE = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


def brace_to_template(fmt: str) -> str:
    """Python str.format / fmt-style: {} {0} {name} {:d} {x:.2f}; {{ }} are literal braces."""
    def rep(m: re.Match) -> str:
        if m.group(0) == "{{":
            return "{"
        if m.group(0) == "}}":
            return "}"
        return spec_placeholder(m.group(1).partition(":")[2])
    return BRACE.sub(rep, fmt)


def spec_placeholder(spec: str) -> str:
    spec = spec.strip()
    if not spec:
        return "<str>"
    t = spec[-1]
    if t in "dnb":
        return "<int>"
    if t in "xX":
        return "<hex>"
    if t in "eEfFgG%":
        return "<float>"
    return "<str>"


PY_PERCENT = re.compile(r"%(?:%|\((?P<name>[^)]*)\))?(?P<flags>[-+ #0]*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?(?P<conv>[diouxXeEfFgGcrsa%])")


def py_percent_to_template(fmt: str) -> str:
    def rep(m: re.Match) -> str:
        c = m.group("conv")
        if m.group(0) == "%%":
            return "%"
        return "<int>" if c in "diou" else "<hex>" if c in "xX" else "<float>" if c in "eEfFgG" else "<str>"
    return PY_PERCENT.sub(rep, fmt)


def tidy(t: str) -> str:
    t = t.replace("\t", " ").replace("\r", "")
    # A message is one line in a log: a newline inside a template splits it; keep the first non-empty line.
    if "\n" in t:
        parts = [p for p in t.split("\n") if p.strip()]
        t = parts[0] if parts else ""
    t = re.sub(r"(<str>){2,}", "<str>", t)
    return t.strip()


def informative(t: str) -> bool:
    """Enough literal text to tell the message from others: 8 letters outside placeholders."""
    lit = re.sub(r"<(?:int|hex|float|str)>", "", t)
    return sum(c.isalpha() for c in lit) >= 8


# --------------------------------------------------------------------------------------------------
# C and C++: calls with a format string, TORCH_CHECK-like macros, glog streams
# --------------------------------------------------------------------------------------------------
def quoted_end(src: str, i: int) -> int:
    """The index of the quote that closes the C string or char literal opened at src[i] (len(src) if none)."""
    q, j, n = src[i], i + 1, len(src)
    while j < n and src[j] != q:
        j += 2 if src[j] == "\\" else 1
    return j


def c_strip_comments(src: str) -> str:
    """Comments become spaces (newlines kept, so line numbers stay); string literals untouched."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if c == '"' or c == "'":
            j = quoted_end(src, i)
            out.append(src[i:j + 1])
            i = j + 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in src[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


C_ESC = {"n": "\n", "t": "\t", '"': '"', "'": "'", "\\": "\\", "r": "", "0": ""}


def c_unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: C_ESC.get(m.group(1), m.group(1)), s)


def split_args(src: str, open_paren: int) -> tuple[list[str], int]:
    """The top-level arguments of the call whose '(' is at open_paren, and the index after ')'."""
    depth, i, start, args, n = 0, open_paren, open_paren + 1, [], len(src)
    while i < n:
        c = src[i]
        if c == '"' or c == "'":
            i = quoted_end(src, i) + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append(src[start:i])
                return args, i + 1
        elif c == "," and depth == 1:
            args.append(src[start:i])
            start = i + 1
        i += 1
    return args, n


STR_LIT = re.compile(r'(?:u8|L|u|U)?"((?:[^"\\]|\\.)*)"')
PRI_MACRO = {"PRIu64": "llu", "PRId64": "lld", "PRIx64": "llx", "PRIi64": "lli", "PRIu32": "u", "PRId32": "d",
             "PRIx32": "x", "PRIu16": "u", "PRIu8": "u", "PRIxPTR": "lx", "PRIuPTR": "lu", "PRIdPTR": "ld",
             "UCS_PRIuMAX": "lu"}


def c_string_expr(arg: str) -> str | None:
    """The text of an argument made only of adjacent string literals and PRI* macros, else None."""
    arg = arg.strip()
    if not arg.startswith(('"', 'u8"', 'L"')):
        return None
    out, i = [], 0
    while i < len(arg):
        if arg[i].isspace():
            i += 1
            continue
        m = STR_LIT.match(arg, i)
        if m:
            out.append(c_unescape(m.group(1)))
            i = m.end()
            continue
        m = re.match(r"[A-Za-z_]\w*", arg[i:])
        if m and m.group(0) in PRI_MACRO:
            out.append(PRI_MACRO[m.group(0)])
            i += m.end()
            continue
        if m:  # a macro spliced between literals (e.g. UCT_IB_IFACE_FMT): unknown text
            out.append("%s")
            i += m.end()
            continue
        return None
    return "".join(out)


def pieces_template(args: list[str]) -> str:
    """c10::str / TORCH_CHECK message pieces: literals kept, every other argument a <str>."""
    out = []
    for a in args:
        s = c_string_expr(a)
        out.append(s if s is not None else "<str>")
    return "".join(out)


def line_of(src: str, pos: int) -> int:
    return src.count("\n", 0, pos) + 1


def slurm_program(path: str) -> str:
    if path.startswith(("src/srun/", "src/api/", "src/common/")):
        return "srun: "
    if path.startswith("src/sbatch/"):
        return "sbatch: "
    return "slurmstepd: "


def extract_c(path: str, src: str, conf: dict, project: str) -> list[dict]:
    rows = []
    code = c_strip_comments(src)
    calls = conf.get("c_calls", {})
    if calls:
        names = sorted(calls, key=len, reverse=True)
        pat = re.compile(r"(?<![\w.>])(" + "|".join(map(re.escape, names)) + r")\s*\(")
        for m in pat.finditer(code):
            name = m.group(1)
            level, form, marker, fmt_arg = calls[name]
            fmt_arg = LEVEL_FIRST.get(name, fmt_arg)
            args, _ = split_args(code, m.end() - 1)
            if len(args) <= fmt_arg:
                continue
            fmt = c_string_expr(args[fmt_arg])
            if fmt is None:
                continue
            t = tidy(printf_to_template(fmt, slurm=project == "slurm", kernel=project == "linux"))
            if project.startswith("nccl"):  # debug.cc: "host:pid:tid [dev] file:line NCCL WARN msg", the file relative to src/
                rel = path[4:] if path.startswith("src/") else path
                marker = f"<str>:<int>:<int> [<int>] {rel}:{line_of(code, m.start())} NCCL WARN "
            if project == "slurm":  # the client's name before log.c's level prefix
                marker = slurm_program(path) + marker
            if project == "linux" and name in LEVEL_FIRST:
                marker = "EDAC <str>: " if name.startswith("edac") else "<str> <str>: "
            if not informative(t):
                continue
            rows.append(dict(template=marker + t, level=level, form=form, path=path, line=line_of(code, m.start()),
                             call=name))
    for name, cond_args in conf.get("checks", {}).items():
        for m in re.finditer(r"(?<![\w])" + name + r"\s*\(", code):
            args, _ = split_args(code, m.end() - 1)
            if cond_args is None or len(args) <= cond_args:
                continue
            ex = args[0].strip() if name == "TORCH_CHECK_WITH" else {"TORCH_CHECK_VALUE": "ValueError",
                                                                      "TORCH_CHECK_TYPE": "TypeError",
                                                                      "TORCH_CHECK_NOT_IMPLEMENTED": "NotImplementedError"}.get(name, "RuntimeError")
            t = tidy(pieces_template(args[cond_args:]))
            if not informative(t):
                continue
            rows.append(dict(template=f"{py_exception_name(ex)}: {t}", level="error", form="line", path=path,
                             line=line_of(code, m.start()), call=name))
    for name, msg_from in conf.get("throws", {}).items():
        for m in re.finditer(r"(?<![\w])" + name + r"\s*\(", code):
            args, _ = split_args(code, m.end() - 1)
            if len(args) <= msg_from:
                continue
            parts = args[msg_from:]
            if name.startswith("C10D_"):  # fmt-style: C10D_ERROR("... {} ...", x)
                fmt = c_string_expr(parts[0])
                if fmt is None:
                    continue
                t = tidy(brace_to_template(fmt))
            else:
                t = tidy(pieces_template(parts))
            if not informative(t):
                continue
            if name == "C10_THROW_ERROR":
                rows.append(dict(template=f"{py_exception_name(args[0].strip())}: {t}", level="error", form="line",
                                 path=path, line=line_of(code, m.start()), call=name))
            else:
                level = "warning" if "WARN" in name else "error"
                rows.append(dict(template=t, level=level, form="log", path=path, line=line_of(code, m.start()),
                                 call=name))
    if conf.get("cpp_streams"):
        for m in re.finditer(r"\bLOG\s*\(\s*(ERROR|WARNING|FATAL)\s*\)", code):
            end = code.find(";", m.end())
            chain = code[m.end():end if end > 0 else len(code)]
            parts = split_stream(chain)
            if len(parts) == 1 and re.fullmatch(r"\w+\.str\(\)", parts[0]):
                parts = stringstream_parts(code, parts[0][:-6], m.start()) or parts
            elif len(parts) == 1 and re.fullmatch(r"[A-Za-z_]\w*", parts[0]):
                parts = built_string_parts(code, parts[0], m.start()) or parts
            t = tidy("".join(c_string_expr(p) if c_string_expr(p) is not None else "<str>" for p in parts))
            if not informative(t):
                continue
            level = {"ERROR": "error", "WARNING": "warning", "FATAL": "fatal"}[m.group(1)]
            rows.append(dict(template=t, level=level, form="log", path=path, line=line_of(code, m.start()),
                             call="LOG(" + m.group(1) + ")"))
    return rows


def built_string_parts(code: str, var: str, before: int) -> list[str] | None:
    """`std::string msg = c10::str("...", x, "..."); LOG(ERROR) << msg;`: the pieces of the nearest
    earlier c10::str (or fmt::format) assigned to the variable, within the 4,000 bytes before the use."""
    window_start = max(0, before - 4000)
    found = None
    for d in re.finditer(r"\b" + re.escape(var) + r"\s*=\s*(c10::str|fmt::format)\s*\(", code[window_start:before]):
        found = d
    if found is None:
        return None
    args, _ = split_args(code, window_start + found.end() - 1)
    if found.group(1) == "fmt::format":
        fmt = c_string_expr(args[0]) if args else None
        return None if fmt is None else ['"' + brace_to_template(fmt).replace('"', '\\"') + '"']
    return args


def stringstream_parts(code: str, var: str, before: int) -> list[str] | None:
    """`LOG(WARNING) << message.str()`: the pieces of the first `message << ...;` after its declaration."""
    decl = None
    for d in re.finditer(r"stringstream\s+" + re.escape(var) + r"\b", code[:before]):
        decl = d
    if decl is None:
        return None
    first = re.compile(r"\b" + re.escape(var) + r"\s*<<").search(code, decl.end(), before)
    if first is None:
        return None
    end = code.find(";", first.end())
    return split_stream(code[first.end() - 2:end])


def split_stream(chain: str) -> list[str]:
    """`<< a << "b" << c` -> ["a", '"b"', "c"], at top level only."""
    parts, depth, i, start, n = [], 0, 0, None, len(chain)
    while i < n:
        c = chain[i]
        if c == '"' or c == "'":
            i = quoted_end(chain, i) + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and chain.startswith("<<", i):
            if start is not None:
                parts.append(chain[start:i])
            start = i + 2
            i += 2
            continue
        i += 1
    if start is not None:
        parts.append(chain[start:])
    return ['"\\n"' if p.strip() in ("std::endl", "'\\n'") else p.strip() for p in parts if p.strip()]


def py_exception_name(cpp: str) -> str:
    """How a C++ error type reaches a Python log: c10::Error is RuntimeError, DistBackendError keeps its name."""
    cpp = cpp.split("::")[-1].strip()
    return {"Error": "RuntimeError", "DistBackendError": "torch.distributed.DistBackendError",
            "DistStoreError": "torch.distributed.DistStoreError", "DistNetworkError": "torch.distributed.DistNetworkError",
            "DistError": "torch.distributed.DistError", "ValueError": "ValueError", "TypeError": "TypeError",
            "IndexError": "IndexError", "NotImplementedError": "NotImplementedError",
            "OutOfMemoryError": "torch.OutOfMemoryError", "AcceleratorError": "torch.AcceleratorError",
            "DistQueueEmptyError": "torch.distributed.DistQueueEmptyError"}.get(cpp, "RuntimeError")


# --------------------------------------------------------------------------------------------------
# Python: raise X(msg), logger.error/warning(msg), warnings.warn(msg), rank_zero_warn(msg)
# --------------------------------------------------------------------------------------------------
PY_LOG_LEVEL = {"error": "error", "exception": "error", "critical": "error", "fatal": "error", "warning": "warning",
                "warn": "warning"}
PY_WARN_FUNCS = {"warn": "warning", "rank_zero_warn": "warning", "warning_once": "warning", "warn_once": "warning",
                 "rank_zero_deprecation": "warning"}
LOG_OBJECT = re.compile(r"(?i)(^|_)(log|logger|logging)$|log$")


def py_expr_template(node: ast.AST) -> str:
    """A message expression as a template: literals kept, every computed value a placeholder."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else "<str>"
    if isinstance(node, ast.JoinedStr):
        out = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                out.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                spec = ""
                if v.format_spec is not None and isinstance(v.format_spec, ast.JoinedStr):
                    spec = "".join(str(x.value) for x in v.format_spec.values if isinstance(x, ast.Constant))
                out.append(spec_placeholder(spec))
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return py_expr_template(node.left) + py_expr_template(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, (ast.Constant, ast.JoinedStr)):
        return py_percent_to_template(py_expr_template(node.left))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
            and isinstance(node.func.value, (ast.Constant, ast.JoinedStr, ast.BinOp))):
        return brace_to_template(py_expr_template(node.func.value))
    return "<str>"


def py_call_name(func: ast.AST) -> tuple[str, str]:
    """(object, attribute) of a call: logger.error -> ("logger", "error"); warn -> ("", "warn")."""
    if isinstance(func, ast.Attribute):
        v = func.value
        obj = v.id if isinstance(v, ast.Name) else v.attr if isinstance(v, ast.Attribute) else ""
        return obj, func.attr
    if isinstance(func, ast.Name):
        return "", func.id
    return "", ""


def message_expr(node: ast.AST, call: ast.Call, parents: dict) -> str:
    """The template of a logged expression; a local variable is followed to its assignment (and `+=`
    additions) earlier in the same function: `msg = f"..."; msg += f"..."; logger.info(msg)`."""
    if not isinstance(node, ast.Name):
        return py_expr_template(node)
    fn = parents.get(call)
    while fn is not None and not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
        fn = parents.get(fn)
    if fn is None:
        return "<str>"
    parts: list[tuple[int, str, bool]] = []
    for n in ast.walk(fn):
        if getattr(n, "lineno", call.lineno + 1) >= call.lineno:
            continue
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.id for t in n.targets):
            parts.append((n.lineno, py_expr_template(n.value), True))
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id == node.id and isinstance(n.op, ast.Add):
            parts.append((n.lineno, py_expr_template(n.value), False))
    parts.sort()
    last = max((i for i, p in enumerate(parts) if p[2]), default=None)
    if last is None:
        return "<str>"
    return "".join(p[1] for p in parts[last:] if p[1] != "<str>" or p[2])


def extract_py(path: str, src: str, info: bool = False) -> list[dict]:
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return []
    parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    levels = dict(PY_LOG_LEVEL, **({"info": "info"} if info else {}))
    rows = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
            _, exc = py_call_name(node.exc.func)
            if not exc or not exc[:1].isupper():
                continue
            t = tidy(py_expr_template(node.exc.args[0]))
            if informative(t):
                rows.append(dict(template=f"{exc}: {t}", level="error", form="line", path=path, line=node.lineno,
                                 call="raise"))
        elif isinstance(node, ast.Call) and node.args:
            obj, attr = py_call_name(node.func)
            level = None
            if attr in levels and obj and LOG_OBJECT.search(obj):
                level = levels[attr]
                form = "log"
            elif info and attr == "log_dist":
                level, form = "info", "log"
            elif attr in PY_WARN_FUNCS and (obj in ("", "warnings") or attr != "warn"):
                level = PY_WARN_FUNCS[attr]
                form = "log"
            elif attr in ("log_dist", "print_rank_0", "print_rank_last", "logger_warning") and node.args:
                # DeepSpeed's log_dist / Megatron's print_rank_0 carry no level: kept when the text says it is one.
                text = py_expr_template(node.args[0])
                if re.search(r"(?i)\b(warning|error|fail|overflow|skipp)", text):
                    level, form = ("error" if re.search(r"(?i)error|fail", text) else "warning"), "log"
            if level is None:
                continue
            t = message_expr(node.args[0], node, parents)
            if len(node.args) > 1 and form == "log":  # logger.warning("... %s", x): lazy %-formatting
                t = py_percent_to_template(t)
            t = tidy(t)
            if informative(t):
                rows.append(dict(template=t, level=level, form=form, path=path, line=node.lineno, call=f"{obj}.{attr}".lstrip(".")))
    return rows


# --------------------------------------------------------------------------------------------------
# Open MPI / PRRTE help files: "[topic]" sections; each topic is one message, shown as a block after a
# dashed line. The template is the topic's first line of text (what the block opens with).
# --------------------------------------------------------------------------------------------------
def extract_help(path: str, src: str) -> list[dict]:
    rows, topic, topic_line, body = [], None, 0, []

    def flush():
        if topic is None:
            return
        lines = [l for l in body if l.strip() and not l.startswith("#") and not set(l.strip()) <= set("-=*")]
        if not lines:
            return
        t = tidy(printf_to_template(lines[0]))
        if informative(t):
            rows.append(dict(template=t, level="error", form="line", path=path, line=topic_line, call="[" + topic + "]"))

    for i, line in enumerate(src.splitlines(), 1):
        m = re.match(r"^\[([^\]]+)\]\s*$", line)
        if m:
            flush()
            topic, topic_line, body = m.group(1), i, []
        elif topic is not None:
            body.append(line)
    flush()
    return rows


# --------------------------------------------------------------------------------------------------
# The CUDA runtime's error strings: cudaGetErrorString()'s table is in libcudart's read-only data, the
# enum names (cudaSuccess, cudaError...) beside the descriptions. The runtime is not open source, so the
# shipped library is the source: the table runs from "cudaSuccess" to the last description after the last
# cudaError name. PyTorch prints them as "CUDA error: <description>" (c10/cuda/CUDAException.h).
# --------------------------------------------------------------------------------------------------
def extract_strings_table(path: str, data: bytes) -> list[dict]:
    runs = [(m.start(), m.group().decode()) for m in re.finditer(rb"[\x20-\x7e]{6,}", data)]
    start = next((i for i, (_, t) in enumerate(runs) if t == "cudaSuccess"), None)
    if start is None:
        return []
    last_name = max(i for i, (_, t) in enumerate(runs[: start + 2000]) if t.startswith("cudaError") and i >= start)
    end = last_name + 1
    while end < len(runs) and " " in runs[end][1] and not runs[end][1].startswith("cuda"):
        end += 1
    rows = []
    for off, t in runs[start:end]:
        if t.startswith("cuda") or " " not in t or t == "no error":
            continue
        rows.append(dict(template="RuntimeError: CUDA error: " + t, level="error",
                         form="line", path=path, line=off, call="cudaGetErrorString"))
    return rows


# --------------------------------------------------------------------------------------------------
def extract(project: str, source) -> list[dict]:
    conf = PROJECTS[project]
    paths = [p for p in source.paths() if selected(p, conf)]
    rows = []
    if conf.get("strings_table"):
        for path in paths:
            with open(os.path.join(source.root, path), "rb") as f:
                rows += extract_strings_table(path, f.read())
        return rows
    for path, text in source.read_many(paths):
        if conf.get("help_txt") and path.endswith(".txt"):
            rows += extract_help(path, text)
        elif path.endswith(".py"):
            if conf.get("py"):
                rows += extract_py(path, text, conf.get("py_info", False))
        elif path.endswith((".c", ".cc", ".cpp", ".cu", ".h", ".hpp", ".inl")):
            rows += extract_c(path, text, conf, project)
    # One row per distinct (template, level): the first site keeps it (sorted by path, then line).
    rows.sort(key=lambda r: (r["path"], r["line"]))
    seen, out = set(), []
    for r in rows:
        key = (r["template"], r["level"])
        if key in seen:
            continue
        seen.add(key)
        out.append(r)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("project", choices=sorted(PROJECTS))
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--repo", help="git directory of the upstream repository")
    g.add_argument("--tree", help="unpacked source tree (then --commit names the release, e.g. v6.1.176)")
    ap.add_argument("--commit", help="commit to read (default HEAD of --repo)")
    ap.add_argument("--origin", default="", help="where the tree came from, recorded in the header")
    ap.add_argument("--out", default=os.path.join(REPO_ROOT, "kb", "_catalogue"))
    a = ap.parse_args()
    if a.tree and not a.commit:
        ap.error("--tree needs --commit (the release it is)")
    src = GitSource(a.repo, a.commit) if a.repo else TreeSource(a.tree, a.commit)
    rows = extract(a.project, src)
    short = src.commit[:12] if re.fullmatch(r"[0-9a-f]{40}", src.commit) else src.commit
    os.makedirs(a.out, exist_ok=True)
    out = os.path.join(a.out, a.project + ".tsv")
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        f.write(f"# project: {a.project}\n# source: {PROJECTS[a.project]['source']}\n# commit: {src.commit}\n")
        if a.origin:
            f.write(f"# origin: {a.origin}\n")
        f.write("# written by tools/catalogue/extract.py; classes by tools/catalogue/classify.py (kb/_catalogue/classes.tsv)\n")
        f.write("template\tlevel\tform\tsource\tclass\tsignature\n")
        for r in rows:
            f.write(f"{r['template']}\t{r['level']}\t{r['form']}\t{r['path']}:{r['line']}@{short}\t\t\n")
    print(f"{a.project}: {len(rows)} templates -> {os.path.relpath(out)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
