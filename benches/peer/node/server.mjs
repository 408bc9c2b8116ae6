// Reference peer for Pictor's identity-provider benchmarks: node-oidc-provider
// (the certified OpenID provider) with its stock in-memory adapter (or
// ADAPTER=map: ./map_adapter.mjs), one confidential client and the built-in
// development login/consent pages.
//
//   PORT=3000 CLIENT_ID=bench CLIENT_SECRET=bench-secret-0123456789 \
//   REDIRECT=http://127.0.0.1:9/cb ADAPTER=memory node server.mjs
//
// Prints exactly `ready http://127.0.0.1:PORT` on stdout once listening.
// See ../README.md for the request sequences a load generator must send.

import * as crypto from 'node:crypto';
import * as http from 'node:http';

// oidc-provider prints two lines we do not want in benchmark logs:
//  - "Unsupported runtime" at import on Node.js < 22 (it runs fine on 20.x,
//    see README.md), and
//  - the devInteractions and in-memory adapter "development-only" warnings at
//    construction (both are deliberate here).
// Drop exactly those; every other warning or notice still goes through.
const QUIET = [
  'oidc-provider WARNING: Unsupported runtime',
  'oidc-provider WARNING: a quick start development-only feature devInteractions',
  'oidc-provider WARNING: a quick start development-only in-memory adapter is used',
];
const origWarn = console.warn;
console.warn = (...args) => {
  const first = String(args[0] ?? '');
  if (QUIET.some((q) => first.includes(q))) return;
  origWarn(...args);
};

// Imported after the console filter is in place (the runtime check runs at import).
const { default: Provider } = await import('oidc-provider');

const PORT = Number.parseInt(process.env.PORT || '3000', 10);
const HOST = '127.0.0.1';
const ISSUER = `http://${HOST}:${PORT}`;
const CLIENT_ID = process.env.CLIENT_ID || 'bench';
const CLIENT_SECRET = process.env.CLIENT_SECRET || 'bench-secret-0123456789';
const REDIRECT = process.env.REDIRECT || 'http://127.0.0.1:9/cb';
// ADAPTER=memory (default): oidc-provider's stock in-memory adapter, untouched.
// ADAPTER=map: ./map_adapter.mjs, unbounded and O(1) per operation; use it for
// long load runs (see README.md: the stock one evicts and slows down).
const ADAPTER = process.env.ADAPTER || 'memory';
if (!['memory', 'map'].includes(ADAPTER)) throw new Error(`ADAPTER must be memory or map, got ${ADAPTER}`);

// RS256 signing key generated at start (nothing persisted: tokens die with the process).
const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingJwk = {
  ...privateKey.export({ format: 'jwk' }),
  kid: crypto.randomBytes(8).toString('hex'),
  alg: 'RS256',
  use: 'sig',
};

const configuration = {
  // no `adapter` key = the stock in-memory (LRU) adapter
  ...(ADAPTER === 'map' ? { adapter: (await import('./map_adapter.mjs')).default } : {}),
  clients: [
    {
      client_id: CLIENT_ID,
      client_secret: CLIENT_SECRET,
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      // client_secret_post is accepted as well: oidc-provider treats the two
      // secret-based methods as interchangeable for a client registered with either.
      token_endpoint_auth_method: 'client_secret_basic',
      id_token_signed_response_alg: 'RS256',
    },
  ],
  responseTypes: ['code'], // code flow only (no implicit/hybrid)
  jwks: { keys: [signingJwk] },
  cookies: {
    // signing keys for the _session / _interaction / _interaction_resume cookies
    keys: [crypto.randomBytes(32).toString('base64url')],
  },
  scopes: ['openid', 'profile', 'email', 'offline_access'],
  claims: {
    openid: ['sub'],
    profile: ['name'],
    email: ['email', 'email_verified'],
  },
  features: {
    devInteractions: { enabled: true }, // built-in login + consent pages
    revocation: {
      enabled: true,
      // same rule as the default (only the client a token was issued to may
      // revoke it), stated here so the "you SHOULD change it" notice stays quiet
      async allowedPolicy(_ctx, client, token) {
        return token.clientId === client.clientId;
      },
    },
    userinfo: { enabled: true },
  },
  pkce: {
    // The harness always sends S256; oidc-provider only supports S256 anyway.
    // Required for every client, which is what Pictor does too.
    required: () => true,
  },
  // Refresh tokens are issued on EVERY authorization_code exchange of a client
  // allowed the refresh_token grant, offline_access or not. This matches Pictor
  // (which always returns a refresh_token and does not know offline_access), and
  // it is what makes the repeated cookie-only authorize (which cannot keep
  // offline_access without prompt=consent) still yield refresh tokens.
  async issueRefreshToken(_ctx, client, _code) {
    return client.grantTypeAllowed('refresh_token');
  },
  // Rotate on every use, like Pictor.
  rotateRefreshToken: true,
  async findAccount(_ctx, sub) {
    return {
      accountId: sub,
      async claims(_use, _scope) {
        return {
          sub,
          email: `${sub}@example.com`,
          email_verified: true,
          name: sub,
        };
      },
    };
  },
  ttl: {
    AccessToken: 3600,
    AuthorizationCode: 60,
    IdToken: 3600,
    RefreshToken: 14 * 24 * 3600,
    Session: 14 * 24 * 3600,
    Grant: 14 * 24 * 3600,
    Interaction: 3600,
  },
  // a plain error body instead of the default HTML page (and its "you SHOULD change" notice)
  async renderError(ctx, out) {
    ctx.type = 'json';
    ctx.body = out;
  },
};

const provider = new Provider(ISSUER, configuration);
// Surface server-side errors (500s) on stderr; 4xx OAuth errors stay silent.
provider.on('server_error', (_ctx, err) => console.error('server_error', err));

const server = http.createServer(provider.callback());
server.keepAliveTimeout = 65_000;
server.listen(PORT, HOST, () => {
  if (ADAPTER !== 'memory') console.error(`adapter: ${ADAPTER}`);
  process.stdout.write(`ready ${ISSUER}\n`);
});

for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    server.close();
    server.closeAllConnections?.();
    process.exit(0);
  });
}
