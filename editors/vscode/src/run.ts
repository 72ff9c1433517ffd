// Runs the firstfault binary once: arguments, text on stdin, bounded stdout and stderr. No shell is
// involved (the arguments reach the program as they are). No `vscode` import here: the unit tests run
// this file under plain node.
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as nodePath from 'path';

/** 256 MiB: the most text given on stdin (the language server's own limit for a document). */
export const MAX_STDIN_BYTES = 256 * 1024 * 1024;
/** 64 MiB: the most stdout kept (an HTML report is far smaller). */
export const MAX_STDOUT_BYTES = 64 * 1024 * 1024;
/** 1 MiB: the most stderr kept. */
export const MAX_STDERR_BYTES = 1024 * 1024;

export interface RunOptions {
  /** Text (or bytes) written to the program's stdin, which is then closed; stdin is empty without it. */
  stdin?: string | Uint8Array;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  maxStdinBytes?: number;
  maxStdoutBytes?: number;
  maxStderrBytes?: number;
  /** Aborting it kills the program and rejects with "firstfault: cancelled". */
  signal?: AbortSignal;
}

export interface RunResult {
  /** The exit status, or null when a signal ended the program. */
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** True when stdout went past maxStdoutBytes and only its start was kept. */
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
}

/** The message for a program that could not be started, naming the setting that chooses it. */
export function spawnErrorMessage(path: string, err: unknown): string {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
  const why =
    code === 'ENOENT'
      ? 'not found'
      : code === 'EACCES'
        ? 'permission denied (is it executable?)'
        : code === 'ENOTDIR'
          ? 'a part of the path is not a directory'
          : err instanceof Error
            ? err.message
            : String(err);
  return `firstfault: cannot run '${path}': ${why}; set firstfault.path`;
}

/** Bytes collected up to a bound; the rest is counted and dropped. */
class Collector {
  private readonly parts: Buffer[] = [];
  private kept = 0;
  truncated = false;
  constructor(private readonly max: number) {}
  add(chunk: Buffer): void {
    const room = this.max - this.kept;
    if (room <= 0) {
      this.truncated = true;
      return;
    }
    if (chunk.length > room) {
      this.parts.push(chunk.subarray(0, room));
      this.kept += room;
      this.truncated = true;
      return;
    }
    this.parts.push(chunk);
    this.kept += chunk.length;
  }
  text(): string {
    return Buffer.concat(this.parts, this.kept).toString('utf8');
  }
}

/**
 * Runs `path args...` with `opts.stdin` on its stdin and resolves with its exit status and output
 * (any status: the caller decides what it means). Rejects when the program cannot be started
 * (spawnErrorMessage), when stdin is over maxStdinBytes, or when opts.signal is aborted.
 */
export function runBinary(path: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  return new Promise<RunResult>((resolve, reject) => {
    const input =
      opts.stdin === undefined ? Buffer.alloc(0) : typeof opts.stdin === 'string' ? Buffer.from(opts.stdin, 'utf8') : Buffer.from(opts.stdin);
    const maxIn = opts.maxStdinBytes ?? MAX_STDIN_BYTES;
    if (input.length > maxIn) {
      reject(new Error(`firstfault: the text is ${mib(input.length)}, over the ${mib(maxIn)} limit; diagnose the file itself instead`));
      return;
    }
    if (opts.signal?.aborted) {
      reject(new Error('firstfault: cancelled'));
      return;
    }
    let settled = false;
    const fail = (message: string): void => {
      if (settled) return;
      settled = true;
      reject(new Error(message));
    };
    const out = new Collector(opts.maxStdoutBytes ?? MAX_STDOUT_BYTES);
    const err = new Collector(opts.maxStderrBytes ?? MAX_STDERR_BYTES);
    let child;
    try {
      child = spawn(path, [...args], { cwd: opts.cwd, env: opts.env, stdio: ['pipe', 'pipe', 'pipe'], shell: false, windowsHide: true });
    } catch (e) {
      fail(spawnErrorMessage(path, e));
      return;
    }
    const onAbort = (): void => {
      child.kill('SIGTERM');
      fail('firstfault: cancelled');
    };
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    child.on('error', (e) => {
      opts.signal?.removeEventListener('abort', onAbort);
      fail(spawnErrorMessage(path, e));
    });
    child.stdout.on('data', (c: Buffer) => out.add(c));
    child.stderr.on('data', (c: Buffer) => err.add(c));
    // The program may exit before it read all of stdin (a usage error): EPIPE is not our error.
    child.stdin.on('error', () => undefined);
    child.on('close', (status, signal) => {
      opts.signal?.removeEventListener('abort', onAbort);
      if (settled) return;
      settled = true;
      resolve({ status, signal, stdout: out.text(), stderr: err.text(), stdoutTruncated: out.truncated, stderrTruncated: err.truncated });
    });
    child.stdin.end(input);
  });
}

function mib(bytes: number): string {
  return bytes < 1024 * 1024 ? `${Math.ceil(bytes / 1024)} KiB` : `${Math.ceil(bytes / (1024 * 1024))} MiB`;
}

/**
 * Where `path` would be run from: a path with a slash as it is (relative to `cwd`), a bare name looked
 * up in the directories of `envPath`. undefined when there is no executable file there.
 */
export function findExecutable(path: string, envPath: string | undefined, cwd?: string): string | undefined {
  const isExecutable = (p: string): boolean => {
    try {
      if (!fs.statSync(p).isFile()) return false;
      fs.accessSync(p, process.platform === 'win32' ? fs.constants.F_OK : fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  };
  if (path === '') return undefined;
  if (path.includes('/') || (process.platform === 'win32' && path.includes('\\'))) {
    const full = nodePath.resolve(cwd ?? process.cwd(), path);
    return isExecutable(full) ? full : undefined;
  }
  const exts = process.platform === 'win32' ? ['', ...(process.env.PATHEXT ?? '.EXE;.CMD;.BAT').split(';')] : [''];
  for (const dir of (envPath ?? '').split(nodePath.delimiter)) {
    if (dir === '') continue;
    for (const ext of exts) {
      const full = nodePath.join(dir, path + ext);
      if (isExecutable(full)) return full;
    }
  }
  return undefined;
}
