// The operator console in a real browser: Debian's headless Chromium, driven by Playwright
// (playwright-core, which downloads no browser). Against the server at RP_BASE_URL, signed in
// with the admin token RP_ADMIN_TOKEN, it does an operator's tasks from the pages alone: sign in,
// create an app and a token (pressed twice while a slow answer is on its way: one token), turn
// offline access on, send a registration link and read its QR
// code off a screenshot, see the device registered through it appear and remove it (once the
// page's question is answered yes; declined, nothing is sent), test-run a
// code customization, look at the events and the certificate queue; then it checks that a
// tenant-scoped admin sees nothing of another app, that hostile text renders as text, and that
// no page loads anything from elsewhere. Screenshots go to SCREENSHOT_DIR (docs/console with
// UPDATE_SCREENSHOTS=1; a temporary folder otherwise).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdtempSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import jsQR from "jsqr";
import { PNG } from "pngjs";

const base = process.env.RP_BASE_URL;
const adminToken = process.env.RP_ADMIN_TOKEN;
if (!base || !adminToken) throw new Error("set RP_BASE_URL and RP_ADMIN_TOKEN (the local server and its LOCAL_ADMIN_TOKEN)");
const here = dirname(fileURLToPath(import.meta.url));
const shots = process.env.UPDATE_SCREENSHOTS === "1"
  ? join(here, "..", "..", "docs", "console")
  : (process.env.SCREENSHOT_DIR || mkdtempSync(join(tmpdir(), "console-shots-")));
mkdirSync(shots, { recursive: true });

const unique = (prefix) => `${prefix}${randomBytes(4).toString("hex")}`;
const app = unique("acme");
const other = unique("globex");
const hostile = "<script>window.pwned=1</script>Acme";
let browser, context, page;
const external = [];
const problems = [];

function watch(ctx, pg) {
  ctx.on("request", (request) => {
    const url = request.url();
    if (!url.startsWith(base) && !url.startsWith("data:")) external.push(url);
  });
  pg.on("console", (message) => { if (message.type() === "error") problems.push(message.text()); });
  pg.on("pageerror", (error) => problems.push(String(error)));
}

async function newSession() {
  const ctx = await browser.newContext({ viewport: { width: 1200, height: 860 } });
  const pg = await ctx.newPage();
  watch(ctx, pg);
  return { ctx, pg };
}

async function signIn(pg, token) {
  await pg.goto(`${base}/console`);
  assert.match(pg.url(), /\/console\/sign-in$/);
  await pg.fill("#token", token);
  await Promise.all([pg.waitForURL(/\/console\/apps$/), pg.click("button[type=submit]:has-text('Sign in')")]);
}

function point(publicKey) {
  const jwk = publicKey.export({ format: "jwk" });
  const bytes = [Buffer.from([4]), Buffer.from(jwk.x, "base64url"), Buffer.from(jwk.y, "base64url")];
  return Buffer.concat(bytes).toString("base64");
}

before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  ({ ctx: context, pg: page } = await newSession());
});

after(async () => {
  await browser?.close();
});

test("signing in exchanges the admin token for an HttpOnly, SameSite=Strict session", async () => {
  await page.goto(`${base}/console`);
  await page.screenshot({ path: join(shots, "sign-in.png") });
  await signIn(page, adminToken);
  const [cookie] = (await context.cookies()).filter((c) => c.name === "rp_console");
  assert.ok(cookie, "a session cookie");
  assert.equal(cookie.httpOnly, true);
  assert.equal(cookie.sameSite, "Strict");
  assert.ok(cookie.value.startsWith("rps_") && !cookie.value.includes(adminToken));
  // The page's script sees neither the session nor the token.
  const seen = await page.evaluate(() => [document.cookie, JSON.stringify(localStorage), JSON.stringify(sessionStorage), document.documentElement.outerHTML]);
  assert.equal(seen[0], "");
  assert.equal(seen[1], "{}");
  assert.equal(seen[2], "{}");
  assert.ok(!seen[3].includes(adminToken));
});

test("an app is created and its offline access turned on", async () => {
  await page.fill("#appId", app);
  await page.fill("#displayName", hostile);
  await Promise.all([page.waitForURL(new RegExp(`/console/apps/${app}\\?notice=created$`)), page.click("button:has-text('Create app')")]);
  // The hostile name is text: shown as typed, never run.
  assert.ok((await page.textContent("h1")).includes(hostile));
  assert.equal(await page.evaluate(() => window.pwned), undefined);
  await page.check("#offlineEnabled");
  await page.fill("#tokenCount", "12");
  await Promise.all([page.waitForURL(/notice=saved$/), page.click("button:has-text('Save settings')")]);
  assert.ok(await page.isChecked("#offlineEnabled"));
  assert.equal(await page.inputValue("#tokenCount"), "12");
  await page.screenshot({ path: join(shots, "app.png"), fullPage: true });
  await page.goto(`${base}/console/apps`);
  await page.screenshot({ path: join(shots, "apps.png") });
});

let accessToken;
test("an access token is created, shown once with a copy button, and works", async () => {
  await page.goto(`${base}/console/tokens`);
  await page.selectOption("#kind", "access");
  await page.fill("#tokenApp", app);
  await page.fill("#description", "front-desk workstations");
  await Promise.all([page.waitForURL(/\/console\/tokens$/), page.click("button:has-text('Create token')")]);
  accessToken = (await page.textContent("#new-token")).trim();
  assert.match(accessToken, /^rpt_/);
  assert.ok(await page.isVisible("button[data-copy=new-token]"));
  await page.screenshot({ path: join(shots, "token-created.png") });
  const response = await fetch(`${base}/rp/api/oob/client/authentication/${app}/nobody/devices`, {
    headers: { authorization: `Bearer ${accessToken}` },
  });
  assert.notEqual(response.status, 401, "the new token is accepted");
  await page.goto(`${base}/console/tokens`);
  assert.ok(!(await page.content()).includes(accessToken), "the list never shows a secret");
});

test("a form pressed again while its answer is on its way sends nothing more: one token", async () => {
  await page.goto(`${base}/console/tokens`);
  await page.selectOption("#kind", "access");
  await page.fill("#tokenApp", app);
  const description = unique("pressed-twice-");
  await page.fill("#description", description);
  const button = page.locator("#new-token-form button[type=submit]");
  const box = await button.boundingBox();
  // Pressed as a user presses: the page cannot be read while its navigation is pending.
  const press = () => page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
  // The answer is held back, as a cold start holds it; the request itself reaches the server.
  let sent = 0;
  let reached;
  const first = new Promise((resolve) => { reached = resolve; });
  await page.route(`${base}/console/tokens`, async (route) => {
    if (route.request().method() !== "POST") return route.continue();
    sent += 1;
    const response = await route.fetch();
    reached();
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await route.fulfill({ response }).catch(() => {});
  });
  await press();
  await first;
  await press();
  await page.waitForSelector("#new-token");
  await page.unroute(`${base}/console/tokens`);
  assert.equal(sent, 1, "the second press sent nothing");
  await page.goto(`${base}/console/tokens`);
  assert.equal(await page.locator(`tr:has-text("${description}")`).count(), 1, "one token made");

  // An answer that leaves the page (a 204) leaves its form sent, and its button says so; shown
  // again from the browser's history (its back-forward cache), the page can send again.
  await page.route(`${base}/console/tokens`, (route) => {
    if (route.request().method() !== "POST") return route.continue();
    sent += 1;
    return route.fulfill({ status: 204 });
  });
  await page.selectOption("#kind", "access");
  await page.fill("#tokenApp", app);
  const sending = () => page.waitForFunction(() => document.querySelector("#new-token-form button").textContent === "Sending\u2026");
  await button.click();
  await sending();
  await button.click();
  await page.evaluate(() => window.dispatchEvent(new PageTransitionEvent("pageshow", { persisted: true })));
  assert.equal(await button.textContent(), "Create token");
  await button.click();
  await sending();
  // Counted as the route sees it; a moment more for a send that should not be there.
  for (let waited = 0; sent < 3 && waited < 5000; waited += 50) await page.waitForTimeout(50);
  await page.waitForTimeout(300);
  await page.unroute(`${base}/console/tokens`);
  assert.equal(sent, 3, "sent on the first press and again once shown again, not on the press between");
});

let deviceId;
test("a registration link's QR code, read off a screenshot, registers a device that then shows", async () => {
  await page.goto(`${base}/console/apps/${app}/users`);
  await page.fill("#namedUser", "alice");
  await Promise.all([page.waitForURL(/registration-links$/), page.click("button:has-text('Create link')")]);
  const url = (await page.textContent("#link-url")).trim();
  await page.screenshot({ path: join(shots, "registration-link.png") });
  const shot = PNG.sync.read(await page.locator("#link-qr svg").screenshot());
  const decoded = jsQR(new Uint8ClampedArray(shot.data), shot.width, shot.height);
  assert.ok(decoded, "the screenshot holds a QR code");
  assert.equal(decoded.data, url);
  const code = url.split("/rp/register/")[1];

  deviceId = unique("phone-");
  const key = () => point(generateKeyPairSync("ec", { namedCurve: "prime256v1" }).publicKey);
  const registered = await fetch(`${base}/rp/versioned/device/registrations`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ code, deviceId, friendlyName: "Alice's phone", modelNumber: "Pixel 9",
      signingPublicKey: key(), keyAgreementPublicKey: key() }),
  });
  assert.equal(registered.status, 201, await registered.text());

  await page.goto(`${base}/console/apps/${app}/users?user=alice`);
  assert.ok(await page.isVisible(`#devices >> text=${deviceId}`));
  await page.screenshot({ path: join(shots, "devices.png") });
  // Removing cannot be undone, so the page asks first: declined, nothing is sent.
  let asked;
  page.once("dialog", (dialog) => { asked = dialog.message(); dialog.dismiss(); });
  await page.click("button:has-text('Remove device')");
  await page.waitForTimeout(500);
  assert.match(asked, /^Remove this device\?/);
  assert.ok(page.url().endsWith("?user=alice") && await page.isVisible(`#devices >> text=${deviceId}`), "still there");
  page.once("dialog", (dialog) => dialog.accept());
  await Promise.all([page.waitForURL(/notice=removed$/), page.click("button:has-text('Remove device')")]);
  assert.ok(await page.isVisible("#no-devices"));
});

test("a code customization's test run shows its result, logs and error", async () => {
  await page.goto(`${base}/console/apps/${app}/code`);
  await page.fill("#displayName", "Greeter");
  await page.fill("#source", "async function handler(event, api) {\n  console.log('login by', event.user);\n  api.setTransactionText('Hello ' + event.user);\n  return { greeted: event.user };\n}\n");
  await Promise.all([page.waitForURL(/notice=created$/), page.click("#code-form button[type=submit]")]);
  await page.fill("#event", '{"user": "alice"}');
  await Promise.all([page.waitForURL(/\/test$/), page.click("#test-form button[type=submit]")]);
  assert.ok((await page.textContent("#run")).includes("succeeded"));
  assert.ok((await page.textContent("#run-logs")).includes("login by alice"));
  assert.ok((await page.textContent("#run-result")).includes('"greeted": "alice"'));
  await page.locator("#run").scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(shots, "code-test-run.png"), fullPage: true });
  await page.fill("#source", "function handler() { throw new Error('no such user'); }");
  await Promise.all([page.waitForURL(/notice=saved$/), page.click("#code-form button[type=submit]")]);
  await Promise.all([page.waitForURL(/\/test$/), page.click("#test-form button[type=submit]")]);
  assert.ok((await page.textContent("#run-error")).includes("no such user"));
});

test("the events page filters by app and draws a timeline; the queue page counts per app", async () => {
  await page.goto(`${base}/console/events?app=${app}`);
  assert.ok(await page.isVisible("svg#timeline"));
  assert.equal(await page.locator("svg#timeline rect.bar").count(), 24);
  await page.screenshot({ path: join(shots, "events.png"), fullPage: true });
  await page.goto(`${base}/console/certificates`);
  assert.ok(await page.isVisible(`#queue >> text=${app}`));
  await page.screenshot({ path: join(shots, "certificates.png") });
});

test("an admin scoped to another app sees nothing of this one", async () => {
  await page.goto(`${base}/console/apps`);
  await page.fill("#appId", other);
  await page.fill("#displayName", "Globex");
  await Promise.all([page.waitForURL(/notice=created$/), page.click("button:has-text('Create app')")]);
  await page.goto(`${base}/console/tokens`);
  await page.selectOption("#kind", "controlCenterAdmin");
  await page.fill("#tokenApp", other);
  await Promise.all([page.waitForURL(/\/console\/tokens$/), page.click("button:has-text('Create token')")]);
  const scopedToken = (await page.textContent("#new-token")).trim();

  const { ctx, pg } = await newSession();
  await signIn(pg, scopedToken);
  const listed = await pg.textContent("#apps");
  assert.ok(listed.includes(other) && !listed.includes(app), listed);
  assert.ok(!(await pg.isVisible("text=Tokens")), "no tokens page for a scoped admin");
  await pg.screenshot({ path: join(shots, "scoped-admin.png") });
  for (const path of [`/console/apps/${app}`, `/console/apps/${app}/code`, `/console/apps/${app}/content`, "/console/events"]) {
    const response = await pg.goto(`${base}${path}`);
    assert.equal(response.status(), 403, path);
    assert.ok(!(await pg.content()).includes(hostile.slice(8, 20)), path);
  }
  const own = await pg.goto(`${base}/console/apps/${other}/code`);
  assert.equal(own.status(), 200);
  await ctx.close();
});

test("signing out ends the session; nothing was loaded from elsewhere and no page broke its policy", async () => {
  await page.goto(`${base}/console/apps`);
  await Promise.all([page.waitForURL(/\/console\/sign-in$/), page.click("button:has-text('Sign out')")]);
  await page.goto(`${base}/console/apps`);
  assert.match(page.url(), /\/console\/sign-in$/);
  assert.deepEqual(external, []);
  assert.deepEqual(problems.filter((p) => !p.includes("403")), []);
});
