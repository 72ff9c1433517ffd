"""A one-node Slurm on loopback for the fault matrix's `srun` mode.

The same start as tests/cluster/slurm_test.sh part 2 (Debian 12: slurm-wlm 22.05 + munge; root only):
munged with a fresh key in a temporary directory, slurmctld and slurmd on free 127.0.0.1 ports, a
slurm.conf with proctrack/linuxproc, no accounting and a 1 s scheduler loop; readiness is `munge -n`
answering, `scontrol ping` saying UP and `sinfo` showing the node idle (no fixed sleeps). Without that
test's firstfault epilogs: here Slurm only runs the jobs. stop() cancels every job and stops the daemons
(TERM, then KILL after 15 s), newest first, as that test's cleanup does.
"""
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def _free_ports(n):
    ss = [socket.socket() for _ in range(n)]
    for s in ss:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in ss]
    for s in ss:
        s.close()
    return ports


class Slurm:
    def __init__(self, keep_dir=None):
        self.keep_dir = keep_dir
        self.dir = None
        self.procs = []
        self.env = None

    def _wait(self, what, pred, limit):
        end = time.time() + limit
        while time.time() < end:
            if pred():
                return
            time.sleep(0.2)
        raise RuntimeError(f"slurm: {what}: not within {limit}s (see {self.dir}/log)")

    def _ok(self, *cmd):
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True)

    def start(self):
        if os.getuid() != 0:
            raise RuntimeError("slurm: the srun mode needs root (as tests/cluster/slurm_test.sh)")
        for c in ("munged", "munge", "slurmctld", "slurmd", "sbatch", "srun", "scontrol", "sinfo", "scancel", "setpriv"):
            if not shutil.which(c):
                raise RuntimeError(f"slurm: {c} not found (scripts/install-deps.sh installs slurm-wlm and munge)")
        T = Path(tempfile.mkdtemp(prefix="firstfault-bench-slurm."))
        os.chmod(T, 0o755)  # munged wants every directory above its socket searchable by all
        self.dir = T
        for d in ("etc", "munge", "state", "spool/slurmd", "log"):
            (T / d).mkdir(parents=True, exist_ok=True)
        pctld, pslurmd = _free_ports(2)
        shutil.chown(T / "munge", "munge", "munge")
        (T / "munge/munge.key").write_bytes(os.urandom(1024))
        shutil.chown(T / "munge/munge.key", "munge", "munge")
        os.chmod(T / "munge/munge.key", 0o400)
        (T / "etc/slurm.conf").write_text(f"""ClusterName=ffbench
SlurmctldHost=localhost
SlurmctldPort={pctld}
SlurmdPort={pslurmd}
AuthType=auth/munge
AuthInfo=socket={T}/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={T}/state
SlurmdSpoolDir={T}/spool/slurmd
SlurmctldPidFile={T}/slurmctld.pid
SlurmdPidFile={T}/slurmd.pid
SlurmctldLogFile={T}/log/slurmctld.log
SlurmdLogFile={T}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MailProg=/bin/true
SchedulerParameters=sched_interval=1,bf_interval=1
ReturnToService=2
KillWait=5
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
""")
        self.env = dict(os.environ, SLURM_CONF=str(T / "etc/slurm.conf"))
        out = lambda name: open(T / "log" / name, "wb")
        self.procs.append(subprocess.Popen(
            ["setpriv", "--reuid=munge", "--regid=munge", "--init-groups", "munged", "-F",
             f"--socket={T}/munge/munge.sock", f"--key-file={T}/munge/munge.key", f"--pid-file={T}/munge/munged.pid",
             f"--log-file={T}/munge/munged.log", f"--seed-file={T}/munge/munged.seed"],
            stdout=out("munged.stdout"), stderr=subprocess.STDOUT, start_new_session=True))
        self._wait("munged answers", lambda: self._ok("munge", "-S", f"{T}/munge/munge.sock", "-n").returncode == 0, 30)
        self.procs.append(subprocess.Popen(["slurmctld", "-D", "-f", self.env["SLURM_CONF"]], env=self.env,
                                           stdout=out("slurmctld.stdout"), stderr=subprocess.STDOUT,
                                           start_new_session=True))
        self._wait("slurmctld answers scontrol ping", lambda: "is UP" in self._ok("scontrol", "ping").stdout, 60)
        self.procs.append(subprocess.Popen(["slurmd", "-D", "-N", "localhost", "-f", self.env["SLURM_CONF"]],
                                           env=self.env, stdout=out("slurmd.stdout"), stderr=subprocess.STDOUT,
                                           start_new_session=True))
        self._wait("node localhost idle",
                   lambda: self._ok("sinfo", "-h", "-n", "localhost", "-o", "%T").stdout.strip() == "idle", 60)

    def submit(self, script, workdir, output, env):
        e = dict(env, SLURM_CONF=self.env["SLURM_CONF"])
        p = subprocess.run(["sbatch", "--parsable", "-D", str(workdir), "-o", str(output), str(script)],
                           env=e, capture_output=True, text=True, check=True)
        return p.stdout.strip().split(";")[0]

    def state(self, job):
        line = self._ok("scontrol", "-o", "show", "job", job).stdout
        m = re.search(r" JobState=(\S+)", line)
        return (m.group(1) if m else ""), line

    def done(self, job):
        return self.state(job)[0] not in ("", "PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED")

    def wait(self, job, deadline):
        while time.time() < deadline:
            s, _ = self.state(job)
            if s not in ("", "PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED"):
                return True
            time.sleep(0.2)
        return False

    def exit_code(self, job):
        _, line = self.state(job)
        m = re.search(r" ExitCode=(\d+):(\d+)", line)
        return None if not m else (int(m.group(1)) or -int(m.group(2)))

    def cancel(self, job):
        self._ok("scancel", "--quiet", "--full", job)
        end = time.time() + 30
        while time.time() < end and self.state(job)[0] in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING"):
            time.sleep(0.2)

    def stop(self):
        if self.env and self.procs and self.procs[0].poll() is None:
            ids = self._ok("squeue", "-h", "-o", "%i").stdout.split()
            if ids:
                self._ok("scancel", "--quiet", "--full", *ids)
                end = time.time() + 20
                while time.time() < end and self._ok("squeue", "-h", "-o", "%i").stdout.strip():
                    time.sleep(0.2)
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        if self.dir:
            if self.keep_dir:
                shutil.rmtree(self.keep_dir, ignore_errors=True)
                shutil.copytree(self.dir / "log", self.keep_dir, ignore_dangling_symlinks=True)
            shutil.rmtree(self.dir, ignore_errors=True)
