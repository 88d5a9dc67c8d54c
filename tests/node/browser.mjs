// The dashboard in a real browser (Debian's chromium, driven by playwright-core): read
// by tests/tests/dashboard_browser.rs. One JSON object per line on stdout.
//
//   node browser.mjs <dashboard url> <queue> <failed job id> <screenshot dir>
//
// It opens the overview, finds the failed job, clicks Retry and waits, without
// reloading, for the job page to say completed; then pauses the queue from its page.
// Screenshots of the overview and the job page go to <screenshot dir>.
import { chromium } from 'playwright-core';

const [base, queue, jobId, shots] = process.argv.slice(2);
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

  await page.click('button:text-is("Retry")');
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
  print({ errors });
} finally {
  await browser.close();
}
