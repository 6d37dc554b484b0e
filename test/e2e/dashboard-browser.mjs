// What the dashboard's browser tests share: Debian's chromium (driven by playwright-core), a page's
// screenshot under test-results/screenshots/<width>/<page>.png (README.md, "Dashboard"), axe-core's
// accessibility rules run in the page, keyboard reachability, and what a phone's window shows badly.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { expect } from 'vitest';
import { ROOT } from './helpers.mjs';

export const SCREENSHOTS = join(ROOT, 'test-results', 'screenshots');
/** The two windows every page is looked at in: a laptop's and a phone's. */
export const WIDE = 1280;
export const PHONE = 390;

/** Debian's chromium, where `command -v chromium` finds it (CI installs it). */
function findChromium() {
  try {
    const path = execFileSync('sh', ['-c', 'command -v chromium || command -v chromium-browser'], { encoding: 'utf8' }).trim();
    return path && existsSync(path) ? path : null;
  } catch {
    return null;
  }
}

export const chromiumPath = findChromium();
if (!chromiumPath) console.warn('dashboard browser tests skipped: no chromium on PATH (install Debian\'s chromium; .ci/run does)');

export async function launchBrowser() {
  const { chromium } = await import('playwright-core');
  return chromium.launch({ executablePath: chromiumPath, headless: true, args: ['--no-sandbox'] });
}

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** axe-core's violations of impact serious or critical in the page as rendered, each a line naming the rule and the elements. */
export async function axeProblems(page) {
  // Evaluated through the browser's protocol, not added as a <script>: the pages' Content Security
  // Policy (script-src 'self') refuses inline scripts, and the tests keep it as a user's browser has it.
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => (await window.axe.run(document, { resultTypes: ['violations'] })).violations);
  return violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id}: ${v.help} (${v.nodes.map((n) => `${n.target.join(' ')}${n.failureSummary ? ` — ${n.failureSummary.replace(/\s+/g, ' ').slice(0, 160)}` : ''}`).join('; ')})`);
}

const FOCUSABLE = 'a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex="0"]';

/**
 * Tabs through the page: every link, button, input, summary and scrolling box shown and enabled is
 * reached, and each shows a visible focus outline. Each is known by its place among them in document order, which a
 * live list's refresh (the same HTML again) keeps.
 */
export async function keyboardProblems(page) {
  const focusable = await page.evaluate((selector) => [...document.querySelectorAll(selector)].filter((e) => !e.disabled && e.getClientRects().length > 0).length, FOCUSABLE);
  const reached = new Set();
  const problems = [];
  for (let i = 0; i < focusable + 2; i++) {
    await page.keyboard.press('Tab');
    const info = await page.evaluate((selector) => {
      const el = document.activeElement;
      if (!el || el === document.body) return null;
      const style = getComputedStyle(el);
      return { stop: [...document.querySelectorAll(selector)].filter((e) => !e.disabled && e.getClientRects().length > 0).indexOf(el), html: el.outerHTML.slice(0, 80), outline: style.outlineStyle, width: parseFloat(style.outlineWidth) };
    }, FOCUSABLE);
    if (!info) continue;
    reached.add(info.stop);
    if (info.outline === 'none' || info.width < 2) problems.push(`no visible focus on ${info.html}`);
  }
  const missed = await page.evaluate(([selector, seen]) => [...document.querySelectorAll(selector)].filter((e) => !e.disabled && e.getClientRects().length > 0).filter((_, i) => !seen.includes(i)).map((el) => el.outerHTML.slice(0, 80)), [FOCUSABLE, [...reached]]);
  if (missed.length > 0) problems.push(`Tab did not reach ${missed.length} of ${focusable} focusable elements: ${missed.join(' | ')}`);
  return problems;
}

/**
 * What a phone's narrow window shows badly (run in the page): a page wider than the window, an
 * element of main past the window's edge outside a box that scrolls (or clips) it, a list (a table
 * with a header row) not shown as cards (its header row visible, its rows not blocks), a button
 * taller than three lines.
 */
export function narrowProblems() {
  const problems = [];
  const width = document.documentElement.clientWidth;
  const name = (el) => `${el.tagName.toLowerCase()}${el.id ? `#${el.id}` : ''} "${(el.textContent || '').trim().slice(0, 30)}"`;
  if (document.documentElement.scrollWidth > width) problems.push(`page is ${document.documentElement.scrollWidth} px wide in a ${width} px window`);
  const inBox = (el) => {
    for (let e = el.parentElement; e && e !== document.body; e = e.parentElement) if (getComputedStyle(e).overflowX !== 'visible') return true;
    return false;
  };
  for (const el of document.querySelectorAll('main *')) {
    const box = el.getBoundingClientRect();
    if ((box.width === 0 && box.height === 0) || inBox(el)) continue;
    if (box.right > width + 1 || box.left < -1) problems.push(`${name(el)} overflows the window (${Math.round(box.left)} to ${Math.round(box.right)} px)`);
  }
  // A list is a table with a header row; a chart's hourly values are a small table of two columns, not a list.
  for (const table of document.querySelectorAll('main table')) {
    const head = table.tHead;
    if (!head || table.closest('.chart-values')) continue;
    const row = table.tBodies[0]?.rows[0];
    const cards = table.classList.contains('cards') && head.getBoundingClientRect().width <= 1 && (!row || getComputedStyle(row).display === 'block');
    if (!cards) problems.push(`${name(table)} is not shown as cards`);
  }
  for (const button of document.querySelectorAll('button')) if (button.getBoundingClientRect().height > 3 * parseFloat(getComputedStyle(button).lineHeight)) problems.push(`button "${button.textContent.trim().slice(0, 30)}" is ${button.getBoundingClientRect().height} px tall`);
  return problems;
}

/**
 * Saves the page as test-results/screenshots/<width>/<name>.png and checks it: axe's serious and
 * critical rules at every width; keyboard reach on a wide window; at a phone's width what
 * narrowProblems finds.
 */
export async function checkPage(page, name) {
  const { width } = page.viewportSize();
  mkdirSync(join(SCREENSHOTS, String(width)), { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, String(width), `${name}.png`), fullPage: true });
  expect(await axeProblems(page), `${name} at ${width} px: axe`).toEqual([]);
  if (width > PHONE) expect(await keyboardProblems(page), `${name} at ${width} px: keyboard`).toEqual([]);
  else expect(await page.evaluate(narrowProblems), `${name} at ${width} px: narrow window`).toEqual([]);
}
