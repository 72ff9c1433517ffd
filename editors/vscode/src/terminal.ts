// Terminal output: a bounded accumulator for one command's output, the removal of terminal escape
// sequences, and the record of each terminal's latest and last finished command. No `vscode` import
// here: the unit tests run this file under plain node.

/** 64 MiB: the most output kept for one command (the newest bytes are kept). */
export const DEFAULT_OUTPUT_CAP = 64 * 1024 * 1024;

/**
 * Text appended in chunks, of which only the last `capBytes` bytes (UTF-8) are kept: when an append
 * goes past the cap, the oldest bytes are dropped. A cut never splits a character.
 */
export class OutputAccumulator {
  private chunks: string[] = [];
  private sizes: number[] = [];
  private bytes = 0;
  private droppedBytes = 0;

  constructor(readonly capBytes: number = DEFAULT_OUTPUT_CAP) {
    if (!Number.isFinite(capBytes) || capBytes < 0) throw new RangeError(`capBytes must be >= 0, not ${capBytes}`);
  }

  /** Bytes held now (at most capBytes). */
  get byteLength(): number {
    return this.bytes;
  }

  /** Bytes dropped from the start so far. */
  get dropped(): number {
    return this.droppedBytes;
  }

  /** True when some of the output was dropped to stay under the cap. */
  get truncated(): boolean {
    return this.droppedBytes > 0;
  }

  append(chunk: string): void {
    if (chunk === '') return;
    let size = Buffer.byteLength(chunk, 'utf8');
    if (size > this.capBytes) {
      // The chunk alone is over the cap: keep its tail and nothing before it.
      this.droppedBytes += this.bytes;
      this.chunks = [];
      this.sizes = [];
      this.bytes = 0;
      const tail = utf8Tail(chunk, this.capBytes);
      this.droppedBytes += size - tail.bytes;
      chunk = tail.text;
      size = tail.bytes;
      if (size === 0) return;
    }
    this.chunks.push(chunk);
    this.sizes.push(size);
    this.bytes += size;
    this.trim();
    // Many small chunks (a terminal writes often): join them now and then so the arrays stay short.
    if (this.chunks.length > 4096) {
      this.chunks = [this.chunks.join('')];
      this.sizes = [this.bytes];
    }
  }

  /** Everything held, oldest first. */
  text(): string {
    if (this.chunks.length > 1) {
      this.chunks = [this.chunks.join('')];
      this.sizes = [this.bytes];
    }
    return this.chunks.length === 0 ? '' : this.chunks[0];
  }

  clear(): void {
    this.chunks = [];
    this.sizes = [];
    this.bytes = 0;
    this.droppedBytes = 0;
  }

  private trim(): void {
    while (this.bytes > this.capBytes) {
      const excess = this.bytes - this.capBytes;
      const first = this.sizes[0];
      if (first <= excess) {
        this.chunks.shift();
        this.sizes.shift();
        this.bytes -= first;
        this.droppedBytes += first;
        continue;
      }
      const tail = utf8Tail(this.chunks[0], first - excess);
      this.chunks[0] = tail.text;
      this.sizes[0] = tail.bytes;
      this.bytes -= first - tail.bytes;
      this.droppedBytes += first - tail.bytes;
    }
  }
}

/** The last at most `maxBytes` bytes of `text` in UTF-8, starting on a character boundary. */
export function utf8Tail(text: string, maxBytes: number): { text: string; bytes: number } {
  const buf = Buffer.from(text, 'utf8');
  if (buf.length <= maxBytes) return { text, bytes: buf.length };
  let start = buf.length - maxBytes;
  while (start < buf.length && (buf[start] & 0xc0) === 0x80) start++; // skip continuation bytes
  return { text: buf.subarray(start).toString('utf8'), bytes: buf.length - start };
}

// Terminal escape sequences (ECMA-48 / xterm), 7-bit and 8-bit forms:
//  - OSC  ESC ] ... or 0x9d ..., ended by BEL, ST (ESC \ or 0x9c), or cut off by CAN, SUB or another ESC
//         (VS Code's shell integration marks are OSC 633: ESC ] 633 ; A BEL and so on);
//  - DCS, SOS, PM, APC  ESC P / ESC X / ESC ^ / ESC _ ... ST (or 0x90 0x98 0x9e 0x9f ... 0x9c);
//  - CSI  ESC [ or 0x9b, parameter bytes 0x30-0x3f, intermediate bytes 0x20-0x2f, one final byte 0x40-0x7e
//         (colours, cursor moves, erase);
//  - any other escape: ESC, intermediate bytes 0x20-0x2f, one final byte 0x30-0x7e (ESC ( B, ESC 7, ESC =);
//  - an ESC that starts none of these (at the end of the text, or before a newline) on its own.
const ESCAPE_RE = new RegExp(
  [
    '(?:\\x1b\\]|\\x9d)[^\\x07\\x1b\\x9c\\x18\\x1a]*(?:\\x07|\\x1b\\\\|\\x9c)?',
    '(?:\\x1b[PX^_]|[\\x90\\x98\\x9e\\x9f])[^\\x1b\\x9c\\x18\\x1a]*(?:\\x1b\\\\|\\x9c)?',
    '(?:\\x1b\\[|\\x9b)[\\x30-\\x3f]*[\\x20-\\x2f]*[\\x40-\\x7e]',
    '\\x1b[\\x20-\\x2f]*[\\x30-\\x7e]',
    '\\x1b',
  ].join('|'),
  'g',
);

// C0 controls that are not text (everything but TAB, LF and CR), and DEL, left after the sequences go.
const CONTROL_RE = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/g;

/** The text without terminal escape sequences (CSI, OSC, DCS and the rest) and other control characters. */
export function stripEscapes(text: string): string {
  return text.replace(ESCAPE_RE, '').replace(CONTROL_RE, '');
}

// ---- Each terminal's commands ----

/** A command whose output was recorded. */
export interface RecordedCommand {
  commandLine: string;
  /** The exit code; undefined while running, or when the shell did not report one. */
  exitCode: number | undefined;
  finished: boolean;
  output: OutputAccumulator;
}

interface Entry<T> {
  terminal: T;
  seq: number;
  command: RecordedCommand;
}

/**
 * The output of each terminal's latest command and of its last finished command, keyed by terminal and
 * by execution (any objects, compared by identity). Only those commands' output is kept for a terminal.
 */
export class CommandRecorder<T, E> {
  private seq = 0;
  private readonly latest = new Map<T, Entry<T>>();
  private readonly lastFinished = new Map<T, Entry<T>>();
  private readonly open = new Map<E, Entry<T>>();

  constructor(private readonly capBytes: number = DEFAULT_OUTPUT_CAP) {}

  /** A command started in `terminal`: returns its record, which the caller appends the output to. */
  start(terminal: T, execution: E, commandLine: string): RecordedCommand {
    const command: RecordedCommand = { commandLine, exitCode: undefined, finished: false, output: new OutputAccumulator(this.capBytes) };
    const entry: Entry<T> = { terminal, seq: ++this.seq, command };
    // A command whose end is still to come may end after the next one started, so the previous command
    // stays open; older ones that never reported their end are dropped (their output is not kept).
    const prev = this.latest.get(terminal);
    for (const [e, v] of this.open) if (v.terminal === terminal && v !== prev) this.open.delete(e);
    this.latest.set(terminal, entry);
    this.open.set(execution, entry);
    return command;
  }

  /**
   * A command ended (`commandLine` may be more accurate now than at its start). It becomes its
   * terminal's last finished command unless a command that started after it has finished already.
   * Returns its record, or undefined for an execution that is not known.
   */
  end(execution: E, commandLine: string | undefined, exitCode: number | undefined): RecordedCommand | undefined {
    const entry = this.open.get(execution);
    if (!entry) return undefined;
    this.open.delete(execution);
    const c = entry.command;
    if (commandLine !== undefined && commandLine !== '') c.commandLine = commandLine;
    c.exitCode = exitCode;
    c.finished = true;
    const before = this.lastFinished.get(entry.terminal);
    if (!before || before.seq < entry.seq) this.lastFinished.set(entry.terminal, entry);
    return c;
  }

  /** The terminal's last finished command, if any. */
  finished(terminal: T): RecordedCommand | undefined {
    return this.lastFinished.get(terminal)?.command;
  }

  /** The terminal's latest command when it is still running. */
  running(terminal: T): RecordedCommand | undefined {
    const cur = this.latest.get(terminal);
    return cur && !cur.command.finished ? cur.command : undefined;
  }

  /** The terminal closed: forget its output. */
  forget(terminal: T): void {
    this.latest.delete(terminal);
    this.lastFinished.delete(terminal);
    for (const [e, v] of this.open) if (v.terminal === terminal) this.open.delete(e);
  }
}
