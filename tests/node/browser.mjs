// The dashboard in a real browser (Debian's chromium, driven by playwright-core): read
// by tests/tests/dashboard/browser.rs. One JSON object per line on stdout.
//
//   node browser.mjs <dashboard url> <queue> <failed job id> <screenshot dir>
//                    <queue to drain> <flow queue> <deepest flow job id>
//
// It opens the overview, finds the failed job, clicks Retry in its attempt history and
// waits, without reloading, for the job page to say completed; then pauses the queue
// from its page; drains the other queue through its confirmation page; and walks a
// flow's tree from its deepest job up to the root. Screenshots go to <screenshot dir>.
import { chromium } from 'playwright-core';

const [base, queue, jobId, shots, drainQueue, flowQueue, flowLeaf] = process.argv.slice(2);
const print = (value) => console.log(JSON.stringify(value));

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox'],
});
try {
  // The test's access policy reads this header; a real app would use its login.
  const context = await browser.newContext({ extraHTTPHeaders: { 'x-role': 'operator' } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('response', (r) => { if (r.status() >= 400) errors.push(`${r.status()} ${r.url()}`); });

  await page.goto(base);
  await page.screenshot({ path: `${shots}/overview.png`, fullPage: true });
  await page.click(`a:text-is("${queue}")`);
  await page.click('nav.tabs a:has-text("failed")');
  await page.click(`a:text-is("${jobId}")`);
  print({ step: 'job page', state: await page.textContent('h1 .chip') });

  print({ step: 'attempts', failures: await page.locator('ol.attempts li').count() });
  await page.screenshot({ path: `${shots}/failed-job.png`, fullPage: true });
  await page.click('section.attempts button:text-is("Retry")');
  await page.waitForLoadState('load');
  print({ step: 'after retry', state: await page.textContent('h1 .chip') });
  // From here on, nothing reloads the page: count the navigations.
  let navigations = 0;
  page.on('framenavigated', (frame) => { if (frame === page.mainFrame()) navigations += 1; });
  await page.waitForFunction(
    () => document.querySelector('h1 .chip')?.textContent === 'completed',
    null,
    { timeout: 15000 },
  );
  print({ step: 'retried', state: await page.textContent('h1 .chip'), navigations });
  await page.screenshot({ path: `${shots}/job.png`, fullPage: true });

  await page.click(`header a.home`);
  await page.click(`a:text-is("${queue}")`);
  await page.click('button:text-is("Pause")');
  await page.waitForSelector('h1 .chip:text-is("paused")');
  print({ step: 'paused', resume: await page.isVisible('button:text-is("Resume")') });
  // The same queue page in the dark scheme, for a person to look at.
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.screenshot({ path: `${shots}/queue-dark.png`, fullPage: true });
  await page.emulateMedia({ colorScheme: 'light' });

  // A drain asks first, saying how many jobs go.
  await page.click(`header a.home`);
  await page.click(`a:text-is("${drainQueue}")`);
  const before = await page.textContent('[data-count="waiting"]');
  await page.click('a:text-is("Drain waiting…")');
  const question = await page.textContent('.confirm p');
  await page.screenshot({ path: `${shots}/confirm-drain.png`, fullPage: true });
  await page.click('.confirm button:text-is("Drain")');
  await page.waitForSelector('nav.tabs');
  print({ step: 'drained', before, question, after: await page.textContent('[data-count="waiting"]') });

  // A flow, walked from its deepest job to its root.
  await page.goto(`${base}/${flowQueue}/jobs/${flowLeaf}`);
  const tree = await page.locator('ul.tree a').allTextContents();
  await page.screenshot({ path: `${shots}/flow.png`, fullPage: true });
  await page.click(`ul.tree a >> nth=0`);
  print({ step: 'flow', tree, root: await page.textContent('h1') });
  print({ errors });
} finally {
  await browser.close();
}
