// The command line of Docket's own npm scripts (npm start, npm run bench, npm run test:restart…).
// Their settings are environment variables, so the one argument they take is --help (or -h). Any
// other argument stops the script before it does anything, rather than being ignored while a long
// run starts.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const WIDEST = 26;
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Prints `usage` and exits 0 on --help; prints an error and exits 2 on any other argument; returns
 * when there are none.
 * @param {string} command how the user runs it, e.g. `npm run bench`
 * @param {() => string} usage the help text, made only when asked for
 * @param {string[]} [argv]
 */
export function helpOrRefuse(command, usage, argv = process.argv.slice(2)) {
  if (argv.length === 0) return;
  if (argv.some((arg) => arg === '--help' || arg === '-h')) {
    const text = usage();
    process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
    process.exit(0);
  }
  const help = command.startsWith('npm ') ? `${command} -- --help` : `${command} --help`;
  process.stderr.write(`${command}: unknown argument ${JSON.stringify(argv[0])}. It takes no argument but --help: its settings are environment variables (${help} lists them).\n`);
  process.exit(2);
}

/**
 * The settings table under `heading` in one of Docket's markdown documents, as aligned plain text:
 * the help lists what the document lists, so the two cannot drift apart.
 * @param {string} doc path from the repository root, e.g. `docs/BENCHMARKS.md`
 * @param {string} heading the heading line, e.g. `## Settings`
 */
export function docTable(doc, heading) {
  const lines = readFileSync(join(ROOT, doc), 'utf8').split('\n');
  const start = lines.indexOf(heading);
  if (start < 0) throw new Error(`${doc} has no "${heading}" heading`);
  /** @type {string[][]} */
  const rows = [];
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith('#')) break;
    if (!line.startsWith('|')) {
      if (rows.length > 0) break;
      continue;
    }
    const cells = tableCells(line);
    if (cells.every((cell) => /^-+$/.test(cell))) continue;
    rows.push(cells);
  }
  if (rows.length === 0) throw new Error(`${doc}: no table under "${heading}"`);
  // A column is as wide as its cells up to WIDEST; a longer cell runs into the next column.
  const widths = rows[0].slice(0, -1).map((_, i) => Math.max(...rows.map((row) => (row[i] ?? '').length).filter((n) => n <= WIDEST)));
  return rows.map((row) => layRow(row, widths)).join('\n');
}

/**
 * One table row as text: each cell padded to its column, and a cell wider than its column ends the
 * line, the row going on below, under the next column.
 * @param {string[]} row @param {number[]} widths
 */
function layRow(row, widths) {
  let text = '';
  let at = 0;
  row.forEach((cell, i) => {
    const column = 2 + widths.slice(0, i).reduce((sum, w) => sum + w + 2, 0);
    if (at > column) text += `\n${' '.repeat(column)}`;
    else text += ' '.repeat(column - at);
    text += cell;
    at = column + cell.length;
    if (i < row.length - 1 && cell.length > widths[i]) at = Infinity;
  });
  return text.split('\n').map((line) => line.trimEnd()).join('\n');
}

/**
 * The comment that opens a script (its `//` lines up to the first line that is not one), as help:
 * each script's opening comment already says what it does and which variables it reads.
 * @param {string} moduleUrl the script's `import.meta.url`
 */
export function openingComment(moduleUrl) {
  const lines = [];
  for (const line of readFileSync(fileURLToPath(moduleUrl), 'utf8').split('\n')) {
    if (line.startsWith('#!')) continue;
    if (!line.startsWith('//')) break;
    lines.push(line.replace(/^\/\/ ?/, ''));
  }
  return lines.join('\n');
}

/** The cells of one markdown table row; a `|` inside backticks is text, not a border. */
function tableCells(/** @type {string} */ line) {
  const cells = [];
  let cell = '';
  let code = false;
  for (const ch of line.trim().slice(1)) {
    if (ch === '`') code = !code;
    else if (ch === '|' && !code) {
      cells.push(cell.trim());
      cell = '';
    } else cell += ch;
  }
  return cells;
}
