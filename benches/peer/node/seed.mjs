// Walks, against a running server.mjs, the exact HTTP sequence the Rust load
// generator has to implement (see ../README.md), and checks every status.
//
//   node seed.mjs                       # seed once + one repeated flow, prints OK
//   node seed.mjs --loop 200            # ... then 200 more repeated flows, reports the rate
//   node seed.mjs --loop 200 --conc 4   # ... with 4 flows in flight at a time
//
// Env: BASE (default http://127.0.0.1:$PORT, PORT default 3000), CLIENT_ID,
// CLIENT_SECRET, REDIRECT (same defaults as server.mjs), LOGIN (default bench-user),
// SCOPE (default "openid profile email").
// Exits non-zero on any unexpected status. Built-in fetch only, no dependencies.

import * as crypto from 'node:crypto';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    loop: { type: 'string', default: '0' },
    conc: { type: 'string', default: '1' },
    quiet: { type: 'boolean', default: false },
  },
});
const LOOP = Number.parseInt(args.loop, 10);
const CONC = Math.max(1, Number.parseInt(args.conc, 10));

const PORT = process.env.PORT || '3000';
const BASE = (process.env.BASE || `http://127.0.0.1:${PORT}`).replace(/\/$/, '');
const CLIENT_ID = process.env.CLIENT_ID || 'bench';
const CLIENT_SECRET = process.env.CLIENT_SECRET || 'bench-secret-0123456789';
const REDIRECT = process.env.REDIRECT || 'http://127.0.0.1:9/cb';
const LOGIN = process.env.LOGIN || 'bench-user';
const SCOPE = process.env.SCOPE || 'openid profile email'; // Pictor knows only these three
// RFC 6749 §2.3.1: form-urlencode id and secret before base64
const form = (o) => new URLSearchParams(o).toString();
const BASIC = `Basic ${Buffer.from(
  `${encodeURIComponent(CLIENT_ID)}:${encodeURIComponent(CLIENT_SECRET)}`,
).toString('base64')}`;

let verbose = true;
function log(...a) {
  if (verbose) console.log(...a);
}
function fail(msg) {
  console.error(`FAIL: ${msg}`);
  process.exit(1);
}

// ---- a minimal cookie jar: name -> value; paths/domains ignored (one host, and
// every cookie name oidc-provider uses is distinct) --------------------------------
class Jar {
  constructor() { this.map = new Map(); }

  absorb(res) {
    const set = [];
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      const expired = attrs.some((a) => /^\s*expires=.*1970/i.test(a) || /^\s*max-age=0\s*$/i.test(a));
      if (expired || value === '') this.map.delete(name);
      else this.map.set(name, value);
      set.push(`${name}${expired ? '(deleted)' : ''}`);
    }
    return set;
  }

  header(only) {
    return [...this.map]
      .filter(([n]) => !only || only.includes(n))
      .map(([n, v]) => `${n}=${v}`)
      .join('; ');
  }
}

async function req(step, method, url, { jar, cookies, headers = {}, body, expect } = {}) {
  const h = { ...headers };
  if (jar) {
    const c = jar.header(cookies);
    if (c) h.cookie = c;
  }
  if (body !== undefined) h['content-type'] = 'application/x-www-form-urlencoded';
  const res = await fetch(url.startsWith('http') ? url : `${BASE}${url}`, {
    method, headers: h, body, redirect: 'manual',
  }).catch((e) => fail(`${step}: ${method} ${url}: ${e.cause?.code || e.message}`));
  const set = jar ? jar.absorb(res) : [];
  const text = await res.text();
  const loc = res.headers.get('location');
  log(`${step.padEnd(34)} ${method.padEnd(4)} ${new URL(url, BASE).pathname.padEnd(22)} -> ${res.status}`
    + `${loc ? ` Location: ${loc.length > 90 ? `${loc.slice(0, 90)}…` : loc}` : ''}`
    + `${set.length ? ` Set-Cookie: ${set.join(',')}` : ''}`);
  if (res.status !== expect) fail(`${step}: expected ${expect}, got ${res.status}: ${text.slice(0, 400)}`);
  return { res, text, loc };
}

const b64url = (b) => Buffer.from(b).toString('base64url');
function pkce() {
  const verifier = b64url(crypto.randomBytes(32));
  const challenge = b64url(crypto.createHash('sha256').update(verifier).digest());
  return { verifier, challenge };
}

function authorizeUrl(authEndpoint) {
  const { verifier, challenge } = pkce();
  const state = b64url(crypto.randomBytes(12));
  const nonce = b64url(crypto.randomBytes(12));
  const q = new URLSearchParams({
    client_id: CLIENT_ID,
    redirect_uri: REDIRECT,
    response_type: 'code',
    scope: SCOPE,
    state,
    nonce,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  });
  return { url: `${authEndpoint}?${q}`, verifier, state, nonce };
}

function codeFrom(loc, state, iss) {
  if (!loc || !loc.startsWith(`${REDIRECT}?`)) fail(`expected redirect to ${REDIRECT}, got ${loc}`);
  const p = new URL(loc).searchParams;
  if (p.get('error')) fail(`authorization error: ${p.get('error')} ${p.get('error_description')}`);
  if (p.get('state') !== state) fail('state mismatch');
  if (p.get('iss') !== iss) fail(`iss mismatch: ${p.get('iss')}`);
  const code = p.get('code');
  if (!code) fail('no code');
  return code;
}

function decodeJwt(jwt) {
  const [h, p] = jwt.split('.');
  return {
    header: JSON.parse(Buffer.from(h, 'base64url')),
    payload: JSON.parse(Buffer.from(p, 'base64url')),
  };
}

function checkTokens(step, t, { nonce } = {}) {
  for (const k of ['access_token', 'id_token', 'refresh_token']) {
    if (typeof t[k] !== 'string') fail(`${step}: no ${k} in ${JSON.stringify(t)}`);
  }
  if (t.token_type !== 'Bearer') fail(`${step}: token_type ${t.token_type}`);
  const { header, payload } = decodeJwt(t.id_token);
  if (header.alg !== 'RS256') fail(`${step}: id_token alg ${header.alg}`);
  if (payload.sub !== LOGIN) fail(`${step}: id_token sub ${payload.sub}`);
  if (nonce !== undefined && payload.nonce !== nonce) fail(`${step}: id_token nonce mismatch`);
  return { header, payload };
}

// ---------------------------------------------------------------------------------
verbose = true;
console.log(`peer: ${BASE}  client: ${CLIENT_ID}  redirect: ${REDIRECT}  scope: "${SCOPE}"`);

// Discovery first: every other path comes from it.
const disco = JSON.parse((await req('discovery', 'GET', '/.well-known/openid-configuration', { expect: 200 })).text);
const ISS = disco.issuer;
const AUTH = new URL(disco.authorization_endpoint).pathname; // /auth
const TOKEN = new URL(disco.token_endpoint).pathname; // /token
const USERINFO = new URL(disco.userinfo_endpoint).pathname; // /me
const JWKS = new URL(disco.jwks_uri).pathname; // /jwks
const REVOKE = new URL(disco.revocation_endpoint).pathname; // /token/revocation
log(`  endpoints: authorize ${AUTH}  token ${TOKEN}  userinfo ${USERINFO}  jwks ${JWKS}  revocation ${REVOKE}`);

// ---- SEEDING: once per browser-like session ----------------------------------------
console.log('--- seeding (once) ---');
const jar = new Jar();
const a0 = authorizeUrl(AUTH);

// 1. authorize without a session -> 303 to the login interaction; sets _interaction
//    (Path=/interaction/<uid>) and _interaction_resume (Path=/auth/<uid>) + their .sig
let r = await req('1 authorize (no session)', 'GET', a0.url, { jar, expect: 303 });
let uid = r.loc.match(/^\/interaction\/([^/?]+)$/)?.[1];
if (!uid) fail(`expected /interaction/<uid>, got ${r.loc}`);

// 2. the login page (optional for the server; a browser would load it)
r = await req('2 login page', 'GET', `/interaction/${uid}`, { jar, expect: 200 });
if (!r.text.includes('name="login"')) fail('login form not found');

// 3. submit the login form: any login, any password. Needs _interaction(.sig).
r = await req('3 login submit', 'POST', `/interaction/${uid}`, {
  jar, cookies: ['_interaction', '_interaction.sig'],
  body: form({ prompt: 'login', login: LOGIN, password: 'x' }), expect: 303,
});
if (r.loc !== `${ISS}/auth/${uid}`) fail(`expected resume at /auth/${uid}, got ${r.loc}`);

// 4. resume: needs _interaction_resume(.sig). Sets _session(.sig); consent is still
//    missing -> 303 to a NEW interaction uid (new _interaction cookies)
r = await req('4 resume after login', 'GET', r.loc, {
  jar, cookies: ['_interaction_resume', '_interaction_resume.sig'], expect: 303,
});
if (!jar.map.has('_session') || !jar.map.has('_session.sig')) fail('no _session cookie after login');
uid = r.loc.match(/^\/interaction\/([^/?]+)$/)?.[1];
if (!uid) fail(`expected consent interaction, got ${r.loc}`);

// 5. the consent page (optional)
r = await req('5 consent page', 'GET', `/interaction/${uid}`, { jar, expect: 200 });
if (!r.text.includes('name="prompt" value="consent"')) fail('consent form not found');

// 6. confirm consent: form field prompt=consent only. Needs _interaction(.sig).
r = await req('6 consent submit', 'POST', `/interaction/${uid}`, {
  jar, cookies: ['_interaction', '_interaction.sig'],
  body: form({ prompt: 'consent' }), expect: 303,
});

// 7. resume: needs _interaction_resume(.sig) AND _session(.sig) -> 303 to redirect_uri?code
r = await req('7 resume after consent', 'GET', r.loc, {
  jar, cookies: ['_interaction_resume', '_interaction_resume.sig', '_session', '_session.sig'], expect: 303,
});
const seedCode = codeFrom(r.loc, a0.state, ISS);

// 8. exchange the seeding code too (proves the seed flow is complete)
r = await req('8 token (seed code)', 'POST', TOKEN, {
  headers: { authorization: BASIC },
  body: form({ grant_type: 'authorization_code', code: seedCode, redirect_uri: REDIRECT, code_verifier: a0.verifier }),
  expect: 200,
});
checkTokens('seed token', JSON.parse(r.text), { nonce: a0.nonce });

const SESSION = { _session: jar.map.get('_session'), '_session.sig': jar.map.get('_session.sig') };
console.log(`  session cookies for the repeated flow: _session=${SESSION._session} _session.sig=${SESSION['_session.sig']}`);

// ---- REPEATED FLOW: only _session + _session.sig ----------------------------------
const sessionCookie = `_session=${SESSION._session}; _session.sig=${SESSION['_session.sig']}`;

let jwks;
async function repeated(i) {
  const tag = (s) => `${s}${LOOP ? ` #${i}` : ''}`;
  const a = authorizeUrl(AUTH);

  // (a) authorize with the session cookie -> straight 303 to redirect_uri?code=..&state=..&iss=..
  let x = await req(tag('a authorize (cookie)'), 'GET', a.url, { headers: { cookie: sessionCookie }, expect: 303 });
  const code = codeFrom(x.loc, a.state, ISS);
  const setCookies = x.res.headers.getSetCookie().map((c) => c.split('=')[0]);
  if (setCookies.length && !setCookies.every((n) => n.startsWith('_session'))) fail(`unexpected Set-Cookie ${setCookies}`);

  // (b) code exchange, client_secret_basic
  x = await req(tag('b token (authorization_code)'), 'POST', TOKEN, {
    headers: { authorization: BASIC },
    body: form({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: a.verifier }),
    expect: 200,
  });
  const t1 = JSON.parse(x.text);
  const { header } = checkTokens('code exchange', t1, { nonce: a.nonce });
  if (jwks && !jwks.keys.some((k) => k.kid === header.kid)) fail('id_token kid not in JWKS');

  // (c) userinfo with the access token
  x = await req(tag('c userinfo'), 'GET', USERINFO, { headers: { authorization: `Bearer ${t1.access_token}` }, expect: 200 });
  const ui = JSON.parse(x.text);
  if (ui.sub !== LOGIN || ui.email !== `${LOGIN}@example.com` || ui.email_verified !== true || ui.name !== LOGIN) {
    fail(`userinfo claims ${x.text}`);
  }

  // (d) refresh (client_secret_post here, to prove both auth methods work); rotates
  x = await req(tag('d token (refresh_token)'), 'POST', TOKEN, {
    body: form({
      grant_type: 'refresh_token', refresh_token: t1.refresh_token, client_id: CLIENT_ID, client_secret: CLIENT_SECRET,
    }),
    expect: 200,
  });
  const t2 = JSON.parse(x.text);
  checkTokens('refresh', t2);
  if (t2.refresh_token === t1.refresh_token) fail('refresh token was not rotated');

  // (e) a second refresh with the rotated token, basic auth
  x = await req(tag('e token (refresh again)'), 'POST', TOKEN, {
    headers: { authorization: BASIC },
    body: form({ grant_type: 'refresh_token', refresh_token: t2.refresh_token }),
    expect: 200,
  });
  return JSON.parse(x.text);
}

console.log('--- repeated flow (session cookie only) ---');
const jr = await req('discovery', 'GET', '/.well-known/openid-configuration', { expect: 200 });
if (jr.res.headers.get('content-type')?.startsWith('application/json') !== true) fail('discovery content-type');
jwks = JSON.parse((await req('jwks', 'GET', JWKS, { expect: 200 })).text);
if (!jwks.keys?.length || jwks.keys.some((k) => k.d || k.p)) fail('bad JWKS (empty or private)');
// _session.sig is required: oidc-provider signs its cookies (cookies.keys), and an
// unsigned _session is ignored -> back to the login interaction.
{
  const a = authorizeUrl(AUTH);
  const x = await req('authorize, _session w/o .sig', 'GET', a.url, { headers: { cookie: `_session=${SESSION._session}` }, expect: 303 });
  if (!/^\/interaction\//.test(x.loc)) fail(`unsigned _session was accepted: ${x.loc}`);
}
let last = await repeated(0);

// verify the id_token signature against the published JWKS (RS256)
{
  const [h, p, s] = last.id_token.split('.');
  const { kid } = JSON.parse(Buffer.from(h, 'base64url'));
  const jwk = jwks.keys.find((k) => k.kid === kid);
  const ok = crypto.verify('RSA-SHA256', Buffer.from(`${h}.${p}`), crypto.createPublicKey({ key: jwk, format: 'jwk' }), Buffer.from(s, 'base64url'));
  if (!ok) fail('id_token signature does not verify against JWKS');
  log(`  id_token RS256 signature verifies with kid ${kid}`);
}

if (LOOP > 0) {
  console.log(`--- ${LOOP} more repeated flows, ${CONC} at a time (authorize + code exchange + userinfo + 2 refreshes each) ---`);
  verbose = !args.quiet && LOOP <= 5;
  let next = 1;
  let done = 0;
  const t0 = process.hrtime.bigint();
  let tw = t0;
  const WINDOW = 1000; // long loops print the rate per window of 1000 flows
  await Promise.all(Array.from({ length: CONC }, async () => {
    while (next <= LOOP) {
      const i = next;
      next += 1;
      last = await repeated(i); // eslint-disable-line no-await-in-loop
      done += 1;
      if (LOOP >= 2 * WINDOW && done % WINDOW === 0) {
        const now = process.hrtime.bigint();
        console.log(`  flows ${done - WINDOW + 1}..${done}: ${(WINDOW / (Number(now - tw) / 1e9)).toFixed(1)} flows/s`);
        tw = now;
      }
    }
  }));
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  verbose = true;
  console.log(`loop: ${LOOP} flows in ${secs.toFixed(2)} s = ${(LOOP / secs).toFixed(1)} flows/s `
    + `(${((LOOP * 5) / secs).toFixed(0)} requests/s, concurrency ${CONC})`);
}

// Revocation (RFC 7009: 200 with an empty body, also for unknown tokens). Done
// last, on purpose, because in oidc-provider it reaches past the one token:
//  - revoking an ACCESS token also revokes every other token (codes, access and
//    refresh tokens) issued under the same grant = the same session + client, but
//    keeps the grant (the remembered consent);
//  - revoking a REFRESH token does the same AND deletes the grant, so the next
//    cookie-only authorize goes back to the consent interaction.
console.log('--- revocation ends more than the token ---');
await req('revoke access token', 'POST', REVOKE, {
  headers: { authorization: BASIC },
  body: form({ token: last.access_token, token_type_hint: 'access_token' }),
  expect: 200,
});
await req('userinfo (revoked AT)', 'GET', USERINFO, { headers: { authorization: `Bearer ${last.access_token}` }, expect: 401 });
await req('refresh (RT of the same grant)', 'POST', TOKEN, {
  headers: { authorization: BASIC },
  body: form({ grant_type: 'refresh_token', refresh_token: last.refresh_token }),
  expect: 400,
});
{
  const a = authorizeUrl(AUTH);
  let x = await req('authorize (grant kept)', 'GET', a.url, { headers: { cookie: sessionCookie }, expect: 303 });
  const code = codeFrom(x.loc, a.state, ISS);
  x = await req('token (authorization_code)', 'POST', TOKEN, {
    headers: { authorization: BASIC },
    body: form({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: a.verifier }),
    expect: 200,
  });
  const t = JSON.parse(x.text);
  await req('revoke refresh token', 'POST', REVOKE, {
    headers: { authorization: BASIC },
    body: form({ token: t.refresh_token, token_type_hint: 'refresh_token' }),
    expect: 200,
  });
  const b = authorizeUrl(AUTH);
  x = await req('authorize (grant deleted)', 'GET', b.url, { headers: { cookie: sessionCookie }, expect: 303 });
  if (!/^\/interaction\//.test(x.loc)) fail(`expected the consent interaction again, got ${x.loc}`);
}

console.log('OK');
