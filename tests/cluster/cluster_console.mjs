// What the web console's cluster page shows (Debian's Chromium, headless,
// driven by playwright-core, one of the end-to-end tests' npm packages:
// `npm ci` in tests/e2e first, as scripts/test.sh does): its node rows and each collection's shard
// rows, read back from the page for a test to hold against GET /cluster;
// a screenshot in build/e2e-artifacts/ (or $MOEEDB_ARTIFACTS).
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

export async function readClusterConsole(root, base) {
  const require = createRequire(path.join(root, 'tests/e2e/package.json'));
  let chromium;
  try {
    ({ chromium } = require('playwright-core'));
  } catch (e) {
    throw new Error(`playwright-core is not installed: run npm ci in tests/e2e (${e.message})`);
  }
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${base}/console/#cluster`);
    await page.waitForSelector('#nav-cluster:not([hidden])', { timeout: 20000 });
    await page.waitForSelector('#cluster-collections tr[data-shard]', { timeout: 20000 });
    const shown = await page.evaluate(() => ({
      nodes: [...document.querySelectorAll('#cluster-nodes tbody tr')].map((tr) => ({ id: tr.dataset.node, state: tr.dataset.state })),
      collections: Object.fromEntries([...document.querySelectorAll('#cluster-collections section')].map((s) => [
        s.dataset.collection,
        [...s.querySelectorAll('tr[data-shard]')].map((tr) => ({
          shard: Number(tr.dataset.shard),
          assigned: tr.dataset.assigned ? tr.dataset.assigned.split(',') : [],
          ready: tr.dataset.ready ? tr.dataset.ready.split(',') : [],
        })),
      ])),
    }));
    if (errors.length) throw new Error(`the console threw: ${errors.join('; ')}`);
    const artifacts = process.env.MOEEDB_ARTIFACTS ?? path.join(root, 'build/e2e-artifacts');
    fs.mkdirSync(artifacts, { recursive: true });
    await page.screenshot({ path: path.join(artifacts, 'console-cluster.png'), fullPage: true });
    return shown;
  } finally {
    await browser.close();
  }
}
