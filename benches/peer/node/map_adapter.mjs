// An unbounded in-process storage adapter for oidc-provider, used when the server
// runs with ADAPTER=map. It keeps the semantics of a real production adapter (the
// upstream Redis example: per-entry TTL, a session-uid index, a per-grant index
// of its tokens for revocation) without the two artefacts of the stock
// development adapter that distort a throughput benchmark:
//
//  - the stock adapter is an LRU of 1000 (+1000 stale) entries, so a token that is
//    not touched for a few hundred flows is silently evicted (invalid_grant /
//    invalid_token under load), and
//  - it rewrites each grant's member list on every token save with a full scan
//    that prunes expired members, O(tokens in the grant) per save: with one seeded
//    session (= one grant) the server gets slower and slower as flows pile up
//    (about half its CPU in that scan after 5000 flows).
//
// Here: one Map of key -> { payload, exp }, a Set of keys per grant, lookups O(1),
// expired entries dropped on read and by a sweep every 60 s.

const store = new Map(); // `${model}:${id}` -> { payload, exp (ms epoch or Infinity) }
const grants = new Map(); // grantId -> Set of keys
const sessionUids = new Map(); // session uid -> session id
const userCodes = new Map(); // user code -> id

const GRANTABLE = new Set([
  'AccessToken',
  'AuthorizationCode',
  'RefreshToken',
  'DeviceCode',
  'BackchannelAuthenticationRequest',
  'PreAuthorizedCode',
]);

function drop(key, entry) {
  store.delete(key);
  const { payload } = entry;
  if (payload.grantId) grants.get(payload.grantId)?.delete(key);
  if (payload.uid && key.startsWith('Session:') && sessionUids.get(payload.uid) === key.slice(8)) {
    sessionUids.delete(payload.uid);
  }
  if (payload.userCode) userCodes.delete(payload.userCode);
}

function live(key) {
  const entry = store.get(key);
  if (!entry) return undefined;
  if (entry.exp <= Date.now()) {
    drop(key, entry);
    return undefined;
  }
  return entry.payload;
}

const sweep = setInterval(() => {
  const now = Date.now();
  for (const [key, entry] of store) {
    if (entry.exp <= now) drop(key, entry);
  }
  for (const [grantId, keys] of grants) {
    if (keys.size === 0) grants.delete(grantId);
  }
}, 60_000);
sweep.unref();

export default class MapAdapter {
  constructor(model) {
    this.model = model;
  }

  key(id) {
    return `${this.model}:${id}`;
  }

  async upsert(id, payload, expiresIn) {
    const key = this.key(id);
    const previous = store.get(key);
    if (previous) drop(key, previous);
    const exp = typeof expiresIn === 'number' ? Date.now() + expiresIn * 1000 : Infinity;
    store.set(key, { payload, exp });
    if (this.model === 'Session' && payload.uid) sessionUids.set(payload.uid, id);
    if (payload.userCode) userCodes.set(payload.userCode, id);
    if (GRANTABLE.has(this.model) && payload.grantId) {
      let keys = grants.get(payload.grantId);
      if (!keys) {
        keys = new Set();
        grants.set(payload.grantId, keys);
      }
      keys.add(key);
    }
  }

  async find(id) {
    return live(this.key(id));
  }

  async findByUid(uid) {
    const id = sessionUids.get(uid);
    return id === undefined ? undefined : this.find(id);
  }

  async findByUserCode(userCode) {
    const id = userCodes.get(userCode);
    return id === undefined ? undefined : this.find(id);
  }

  async consume(id) {
    const payload = live(this.key(id));
    if (payload) payload.consumed = Math.floor(Date.now() / 1000);
  }

  async destroy(id) {
    const key = this.key(id);
    const entry = store.get(key);
    if (entry) drop(key, entry);
  }

  async revokeByGrantId(grantId) {
    const keys = grants.get(grantId);
    if (!keys) return;
    grants.delete(grantId);
    for (const key of keys) {
      const entry = store.get(key);
      if (entry) drop(key, entry);
    }
  }
}
