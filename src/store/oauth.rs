//! OAuth 2.0 / OIDC state: registered clients, authorization codes, token families with their
//! refresh and access tokens, remembered consents and RS256 signing keys.
//!
//! Every secret (client secret, code, token) is stored as the SHA-256 of its value. Everything
//! issued from one authorization shares a *family*: revoking the family (code replay, refresh-token
//! reuse, user revocation, revoke of a refresh token) ends every token in it.

use std::fmt;

use redb::{ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::tables::*;
use super::{Store, StoreError, codec};
use crate::clock::Millis;

pub const CODE_TTL_MS: u64 = 5 * 60 * 1000;
pub const ACCESS_TTL_MS: u64 = 60 * 60 * 1000;
pub const REFRESH_TTL_MS: u64 = 30 * 24 * 60 * 60 * 1000;

#[derive(Clone, Serialize, Deserialize)]
pub struct ClientRecord {
    /// The public client identifier (`client_id` = `app_name`).
    pub name: String,
    /// Hex SHA-256 of the client secret.
    pub secret_hash: String,
    /// Exact redirect URIs allowed (compared byte for byte).
    pub redirect_uris: Vec<String>,
    pub created_at: Millis,
    /// Immutable random id of this registration: consents are bound to it, so a client
    /// registered later under a removed client's name inherits nothing. 0 for clients
    /// registered before it existed.
    #[serde(default)]
    pub uid: u128,
    /// Where RP-initiated logout may send the browser afterwards (exact match), like
    /// `redirect_uris`. Empty: logout ends on Pictor's own "signed out" page.
    #[serde(default)]
    pub post_logout_redirect_uris: Vec<String>,
    /// How the consent page presents the app.
    #[serde(default)]
    pub profile: ClientProfile,
}

/// What the consent page shows of an app besides its client id: a display name, a logo (linked
/// from the app's own server, never fetched by Pictor) and a homepage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientProfile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logo_uri: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub homepage: Option<String>,
}

impl fmt::Debug for ClientRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientRecord")
            .field("name", &self.name)
            .field("redirect_uris", &self.redirect_uris)
            .field("post_logout_redirect_uris", &self.post_logout_redirect_uris)
            .field("secret_hash", &"<hidden>")
            .finish()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CodeRecord {
    pub client: String,
    pub user_id: u64,
    pub redirect_uri: String,
    pub scope: String,
    pub nonce: Option<String>,
    /// PKCE S256 challenge, if one was sent.
    pub challenge: Option<String>,
    pub auth_time: Millis,
    pub expires_at: Millis,
    pub used_at: Option<Millis>,
    /// The family issued from this code (set at exchange).
    pub family: Option<u128>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FamilyRecord {
    pub id: u128,
    pub client: String,
    pub user_id: u64,
    pub scope: String,
    pub auth_time: Millis,
    pub created_at: Millis,
    pub revoked_at: Option<Millis>,
    pub revoked_reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RefreshRecord {
    pub family: u128,
    pub client: String,
    pub user_id: u64,
    pub scope: String,
    pub created_at: Millis,
    pub expires_at: Millis,
    /// Set when the token was exchanged for a new one (rotation). Using it again is reuse.
    pub rotated_at: Option<Millis>,
    pub revoked_at: Option<Millis>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AccessRecord {
    pub family: u128,
    pub client: String,
    pub user_id: u64,
    pub scope: String,
    pub expires_at: Millis,
    pub revoked_at: Option<Millis>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConsentRecord {
    pub scopes: Vec<String>,
    pub granted_at: Millis,
    /// The `ClientRecord::uid` the consent was given to.
    #[serde(default)]
    pub client_uid: u128,
    /// The person's spending limits for the app (`images:generate`): credits per UTC day and
    /// in total; `None` is no limit.
    #[serde(default)]
    pub caps: SpendCaps,
}

/// Limits on what an app may spend of a person's credits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpendCaps {
    pub daily: Option<u32>,
    pub total: Option<u32>,
}

/// What an app spent of a person's credits (charges minus refunds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppSpend {
    /// The UTC day `today` counts.
    pub day: u32,
    pub today: u64,
    pub total: u64,
}

impl AppSpend {
    /// Today's spend as of `day` (zero once the day has turned).
    pub fn today_on(&self, day: u32) -> u64 {
        if self.day == day { self.today } else { 0 }
    }
}

#[derive(Clone, Serialize, Deserialize)]
pub struct SigningKeyRecord {
    pub kid: String,
    /// PKCS#8 DER of the private key: `sealed:` + base64 of it sealed with the data folder's
    /// `secret.key` (plain base64 in stores written before keys were sealed; sealed at start).
    pub pkcs8: String,
    /// Public modulus and exponent, base64url (as in a JWK).
    pub n: String,
    pub e: String,
    pub created_at: Millis,
    /// When a newer key replaced it; it stays published until tokens it signed have expired.
    pub retired_at: Option<Millis>,
}

impl fmt::Debug for SigningKeyRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKeyRecord")
            .field("kid", &self.kid)
            .field("retired_at", &self.retired_at)
            .finish()
    }
}

/// Hashes of freshly minted tokens, to be stored by an exchange.
pub struct NewTokens {
    pub access_hash: [u8; 32],
    pub refresh_hash: [u8; 32],
    pub family: u128,
}

/// What an exchange produced (for building the token response).
#[derive(Debug, Clone)]
pub struct Issued {
    pub user_id: u64,
    pub scope: String,
    pub nonce: Option<String>,
    pub auth_time: Millis,
    pub family: u128,
}

/// Why a grant was refused; the text is the `error_description`.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    #[error("{0}")]
    InvalidGrant(String),
    #[error("{0}")]
    InvalidScope(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

macro_rules! grant_err_from {
    ($($t:ty),*) => {$(
        impl From<$t> for GrantError {
            fn from(e: $t) -> Self {
                GrantError::Store(e.into())
            }
        }
    )*};
}
grant_err_from!(
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

fn get<T: serde::de::DeserializeOwned>(
    txn: &WriteTransaction,
    table: redb::TableDefinition<&[u8], &[u8]>,
    key: &[u8],
) -> Result<Option<T>, StoreError> {
    let t = txn.open_table(table)?;
    let row = t.get(key)?;
    row.map(|v| codec::decode(v.value())).transpose()
}

fn put<T: Serialize>(
    txn: &WriteTransaction,
    table: redb::TableDefinition<&[u8], &[u8]>,
    key: &[u8],
    value: &T,
) -> Result<(), StoreError> {
    txn.open_table(table)?
        .insert(key, codec::encode(value)?.as_slice())?;
    Ok(())
}

fn read_family(txn: &WriteTransaction, id: u128) -> Result<Option<FamilyRecord>, StoreError> {
    let t = txn.open_table(TOKEN_FAMILIES)?;
    let row = t.get(id)?;
    row.map(|v| codec::decode(v.value())).transpose()
}

fn revoke_family_in(
    txn: &WriteTransaction,
    id: u128,
    reason: &str,
    now: Millis,
) -> Result<(), StoreError> {
    if let Some(mut fam) = read_family(txn, id)?
        && fam.revoked_at.is_none()
    {
        fam.revoked_at = Some(now);
        fam.revoked_reason = Some(reason.to_string());
        txn.open_table(TOKEN_FAMILIES)?
            .insert(id, codec::encode(&fam)?.as_slice())?;
    }
    Ok(())
}

/// Revokes every live grant family of a user (password change, ban). Returns how many.
pub(crate) fn revoke_user_families_in(
    txn: &WriteTransaction,
    user_id: u64,
    reason: &str,
    now: Millis,
) -> Result<usize, StoreError> {
    let ids: Vec<u128> = {
        let idx = txn.open_table(FAMILIES_BY_USER)?;
        let mut ids = Vec::new();
        for row in idx.range((user_id, 0)..=(user_id, u128::MAX))? {
            ids.push(row?.0.value().1);
        }
        ids
    };
    let mut n = 0;
    for id in ids {
        if read_family(txn, id)?.is_some_and(|f| f.revoked_at.is_none()) {
            revoke_family_in(txn, id, reason, now)?;
            n += 1;
        }
    }
    // Codes issued but not yet exchanged would start new grants: they go too (used ones stay,
    // so a late replay is still recognised).
    txn.open_table(AUTH_CODES)?
        .extract_if(|_, v| {
            codec::decode::<CodeRecord>(v)
                .map(|c| c.user_id == user_id && c.used_at.is_none())
                .unwrap_or(false)
        })?
        .count();
    Ok(n)
}

/// Whether `requested` (space-separated) is a subset of `granted`.
fn scope_subset(requested: &str, granted: &str) -> bool {
    let granted: Vec<&str> = granted.split_whitespace().collect();
    requested.split_whitespace().all(|s| granted.contains(&s))
}

#[allow(clippy::too_many_arguments)]
fn issue_in(
    txn: &WriteTransaction,
    tokens: &NewTokens,
    client: &str,
    user_id: u64,
    scope: &str,
    auth_time: Millis,
    new_family: bool,
    now: Millis,
) -> Result<(), StoreError> {
    if new_family {
        let fam = FamilyRecord {
            id: tokens.family,
            client: client.to_string(),
            user_id,
            scope: scope.to_string(),
            auth_time,
            created_at: now,
            revoked_at: None,
            revoked_reason: None,
        };
        txn.open_table(TOKEN_FAMILIES)?
            .insert(fam.id, codec::encode(&fam)?.as_slice())?;
        txn.open_table(FAMILIES_BY_USER)?
            .insert((user_id, fam.id), ())?;
    }
    let refresh = RefreshRecord {
        family: tokens.family,
        client: client.to_string(),
        user_id,
        scope: scope.to_string(),
        created_at: now,
        expires_at: now + REFRESH_TTL_MS,
        rotated_at: None,
        revoked_at: None,
    };
    put(txn, REFRESH_TOKENS, &tokens.refresh_hash, &refresh)?;
    let access = AccessRecord {
        family: tokens.family,
        client: client.to_string(),
        user_id,
        scope: scope.to_string(),
        expires_at: now + ACCESS_TTL_MS,
        revoked_at: None,
    };
    put(txn, ACCESS_TOKENS, &tokens.access_hash, &access)?;
    Ok(())
}

impl Store {
    pub fn add_client(&self, client: ClientRecord) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        {
            let mut t = txn.open_table(CLIENTS)?;
            if t.get(client.name.as_str())?.is_some() {
                return Err(StoreError::Conflict(format!(
                    "a client named {:?} already exists",
                    client.name
                )));
            }
            t.insert(client.name.as_str(), codec::encode(&client)?.as_slice())?;
        }
        self.commit(txn)?;
        Ok(())
    }

    /// Replaces a client's post-logout redirect URIs.
    pub fn set_client_logout_uris(&self, name: &str, uris: Vec<String>) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        {
            let mut t = txn.open_table(CLIENTS)?;
            let mut client: ClientRecord = t
                .get(name)?
                .map(|v| codec::decode(v.value()))
                .transpose()?
                .ok_or_else(|| StoreError::NotFound(format!("no client named {name:?}")))?;
            client.post_logout_redirect_uris = uris;
            t.insert(name, codec::encode(&client)?.as_slice())?;
        }
        self.commit(txn)?;
        Ok(())
    }

    pub fn client(&self, name: &str) -> Result<Option<ClientRecord>, StoreError> {
        let txn = self.begin_read()?;
        let t = txn.open_table(CLIENTS)?;
        t.get(name)?.map(|v| codec::decode(v.value())).transpose()
    }

    pub fn clients(&self) -> Result<Vec<ClientRecord>, StoreError> {
        let txn = self.begin_read()?;
        let t = txn.open_table(CLIENTS)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            out.push(codec::decode(row?.1.value())?);
        }
        Ok(out)
    }

    /// Removes a client and revokes everything issued to it.
    pub fn remove_client(&self, name: &str, now: Millis) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        {
            let mut t = txn.open_table(CLIENTS)?;
            if t.remove(name)?.is_none() {
                return Err(StoreError::NotFound(format!("no client named {name:?}")));
            }
            let ids: Vec<u128> = {
                let fams = txn.open_table(TOKEN_FAMILIES)?;
                let mut ids = Vec::new();
                for row in fams.iter()? {
                    let (k, v) = row?;
                    let fam: FamilyRecord = codec::decode(v.value())?;
                    if fam.client == name && fam.revoked_at.is_none() {
                        ids.push(k.value());
                    }
                }
                ids
            };
            for id in ids {
                revoke_family_in(&txn, id, "client removed", now)?;
            }
            // Its remembered consents and pending codes go with it.
            txn.open_table(CONSENTS)?
                .extract_if(|(_, client), _| client == name)?
                .count();
            txn.open_table(AUTH_CODES)?
                .extract_if(|_, v| {
                    codec::decode::<CodeRecord>(v)
                        .map(|c| c.client == name)
                        .unwrap_or(false)
                })?
                .count();
        }
        self.commit(txn)?;
        Ok(())
    }

    pub fn store_code(&self, code_hash: [u8; 32], record: CodeRecord) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        put(&txn, AUTH_CODES, &code_hash, &record)?;
        self.commit(txn)?;
        Ok(())
    }

    /// The authorization-code grant. Single use: a second exchange fails and revokes what the
    /// first one issued. `verify_pkce(challenge)` checks the verifier against the stored challenge.
    pub fn exchange_code(
        &self,
        code_hash: [u8; 32],
        client: &str,
        redirect_uri: Option<&str>,
        verify_pkce: impl FnOnce(Option<&str>) -> Result<(), String>,
        tokens: NewTokens,
        now: Millis,
    ) -> Result<Issued, GrantError> {
        let txn = self.begin_write()?;
        let Some(mut code) = get::<CodeRecord>(&txn, AUTH_CODES, &code_hash)? else {
            return Err(GrantError::InvalidGrant(
                "the authorization code is invalid".into(),
            ));
        };
        if code.client != client {
            return Err(GrantError::InvalidGrant(
                "the authorization code was issued to another client".into(),
            ));
        }
        if code.used_at.is_some() {
            // Replay: the code leaked. End everything issued from it (RFC 6749 §4.1.2).
            if let Some(family) = code.family {
                revoke_family_in(&txn, family, "authorization code replayed", now)?;
            }
            self.commit(txn)?;
            return Err(GrantError::InvalidGrant(
                "the authorization code was already used".into(),
            ));
        }
        if now >= code.expires_at {
            return Err(GrantError::InvalidGrant(
                "the authorization code has expired".into(),
            ));
        }
        if redirect_uri != Some(code.redirect_uri.as_str()) {
            return Err(GrantError::InvalidGrant(
                "redirect_uri does not match the authorization request".into(),
            ));
        }
        verify_pkce(code.challenge.as_deref()).map_err(GrantError::InvalidGrant)?;
        code.used_at = Some(now);
        code.family = Some(tokens.family);
        put(&txn, AUTH_CODES, &code_hash, &code)?;
        issue_in(
            &txn,
            &tokens,
            client,
            code.user_id,
            &code.scope,
            code.auth_time,
            true,
            now,
        )?;
        self.commit(txn)?;
        Ok(Issued {
            user_id: code.user_id,
            scope: code.scope,
            nonce: code.nonce,
            auth_time: code.auth_time,
            family: tokens.family,
        })
    }

    /// The refresh-token grant with rotation: the presented token is retired and a new one (and a
    /// new access token) issued in the same family. A retired token presented again is reuse:
    /// the whole family is revoked.
    pub fn refresh(
        &self,
        refresh_hash: [u8; 32],
        client: &str,
        requested_scope: Option<&str>,
        tokens: NewTokens,
        now: Millis,
    ) -> Result<Issued, GrantError> {
        // Combined with other clients' grants (and the job engine's writes) arriving meanwhile:
        // one transaction, one commit. A refusal is the inner error: it writes nothing but, for
        // a reused token, the family's revocation, which commits with the batch.
        let (client, scope) = (client.to_owned(), requested_scope.map(str::to_owned));
        let (result, seq) = self.write_combined(move |txn| {
            match refresh_in(txn, refresh_hash, &client, scope.as_deref(), &tokens, now) {
                Err(GrantError::Store(e)) => Err(e),
                other => Ok(other),
            }
        })?;
        // Durable before the answer, also a refusal that revoked a family.
        self.wait_durable(seq)?;
        result
    }

    /// A valid (unexpired, unrevoked, family alive) access token.
    pub fn access_token(
        &self,
        hash: &[u8; 32],
        now: Millis,
    ) -> Result<Option<AccessRecord>, StoreError> {
        let txn = self.begin_read()?;
        let t = txn.open_table(ACCESS_TOKENS)?;
        let Some(rec) = t
            .get(hash.as_slice())?
            .map(|v| codec::decode::<AccessRecord>(v.value()))
            .transpose()?
        else {
            return Ok(None);
        };
        if rec.revoked_at.is_some() || now >= rec.expires_at {
            return Ok(None);
        }
        let fams = txn.open_table(TOKEN_FAMILIES)?;
        let fam: Option<FamilyRecord> = fams
            .get(rec.family)?
            .map(|v| codec::decode(v.value()))
            .transpose()?;
        Ok(fam.filter(|f| f.revoked_at.is_none()).map(|_| rec))
    }

    /// RFC 7009 revocation of a token issued to `client`. A refresh token ends its whole family
    /// (and so its access tokens); an access token ends itself. Unknown tokens and tokens of other
    /// clients change nothing.
    pub fn revoke_token(
        &self,
        hash: [u8; 32],
        client: &str,
        now: Millis,
    ) -> Result<bool, StoreError> {
        let txn = self.begin_write()?;
        let mut changed = false;
        if let Some(rec) = get::<RefreshRecord>(&txn, REFRESH_TOKENS, &hash)?
            && rec.client == client
        {
            revoke_family_in(&txn, rec.family, "refresh token revoked by the client", now)?;
            changed = true;
        } else if let Some(mut rec) = get::<AccessRecord>(&txn, ACCESS_TOKENS, &hash)?
            && rec.client == client
            && rec.revoked_at.is_none()
        {
            rec.revoked_at = Some(now);
            put(&txn, ACCESS_TOKENS, &hash, &rec)?;
            changed = true;
        }
        self.commit(txn)?;
        Ok(changed)
    }

    /// Revokes every app's grant of a user (password change): refresh tokens stop working and
    /// the apps must ask the user to sign in again. Returns how many grants ended.
    pub fn revoke_user_grants(
        &self,
        user_id: u64,
        reason: &str,
        now: Millis,
    ) -> Result<usize, StoreError> {
        let txn = self.begin_write()?;
        let n = revoke_user_families_in(&txn, user_id, reason, now)?;
        self.commit(txn)?;
        Ok(n)
    }

    /// The user's live grants (one per family), newest first.
    pub fn user_grants(&self, user_id: u64, now: Millis) -> Result<Vec<FamilyRecord>, StoreError> {
        let txn = self.begin_read()?;
        let idx = txn.open_table(FAMILIES_BY_USER)?;
        let fams = txn.open_table(TOKEN_FAMILIES)?;
        let mut out = Vec::new();
        for row in idx.range((user_id, 0)..=(user_id, u128::MAX))?.rev() {
            let id = row?.0.value().1;
            if let Some(v) = fams.get(id)? {
                let fam: FamilyRecord = codec::decode(v.value())?;
                if fam.revoked_at.is_none() && now < fam.created_at + REFRESH_TTL_MS * 12 {
                    out.push(fam);
                }
            }
        }
        Ok(out)
    }

    /// The user withdraws an app: every grant family of that client ends and the consent is
    /// forgotten.
    pub fn revoke_client_for_user(
        &self,
        user_id: u64,
        client: &str,
        now: Millis,
    ) -> Result<usize, StoreError> {
        let txn = self.begin_write()?;
        let mut n = 0;
        {
            let ids: Vec<u128> = {
                let idx = txn.open_table(FAMILIES_BY_USER)?;
                let mut ids = Vec::new();
                for row in idx.range((user_id, 0)..=(user_id, u128::MAX))? {
                    ids.push(row?.0.value().1);
                }
                ids
            };
            for id in ids {
                if let Some(fam) = read_family(&txn, id)?
                    && fam.client == client
                    && fam.revoked_at.is_none()
                {
                    revoke_family_in(&txn, id, "revoked by the user", now)?;
                    n += 1;
                }
            }
            txn.open_table(CONSENTS)?.remove((user_id, client))?;
        }
        self.commit(txn)?;
        Ok(n)
    }

    /// The user's remembered consent for the client registered under `client` now (a consent
    /// given to an earlier registration of the same name does not count).
    pub fn consent(&self, user_id: u64, client: &str) -> Result<Option<ConsentRecord>, StoreError> {
        let txn = self.begin_read()?;
        let Some(current) = txn
            .open_table(CLIENTS)?
            .get(client)?
            .map(|v| codec::decode::<ClientRecord>(v.value()))
            .transpose()?
        else {
            return Ok(None);
        };
        let t = txn.open_table(CONSENTS)?;
        let consent: Option<ConsentRecord> = t
            .get((user_id, client))?
            .map(|v| codec::decode(v.value()))
            .transpose()?;
        Ok(consent.filter(|c| c.client_uid == current.uid))
    }

    pub fn set_consent(
        &self,
        user_id: u64,
        client: &str,
        scopes: Vec<String>,
        caps: Option<SpendCaps>,
        now: Millis,
    ) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        {
            let client_uid = txn
                .open_table(CLIENTS)?
                .get(client)?
                .map(|v| codec::decode::<ClientRecord>(v.value()))
                .transpose()?
                .ok_or_else(|| StoreError::NotFound(format!("no client named {client:?}")))?
                .uid;
            let mut t = txn.open_table(CONSENTS)?;
            let earlier = t
                .get((user_id, client))?
                .map(|v| codec::decode::<ConsentRecord>(v.value()))
                .transpose()?
                .filter(|c| c.client_uid == client_uid);
            let caps = caps.unwrap_or_else(|| earlier.as_ref().map(|c| c.caps).unwrap_or_default());
            let mut merged: Vec<String> = earlier.map(|c| c.scopes).unwrap_or_default();
            for s in scopes {
                if !merged.contains(&s) {
                    merged.push(s);
                }
            }
            t.insert(
                (user_id, client),
                codec::encode(&ConsentRecord {
                    scopes: merged,
                    granted_at: now,
                    client_uid,
                    caps,
                })?
                .as_slice(),
            )?;
        }
        self.commit(txn)?;
        Ok(())
    }

    /// Changes the spending limits the person set for an app they allowed.
    pub fn set_app_caps(
        &self,
        user_id: u64,
        client: &str,
        caps: SpendCaps,
    ) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        {
            let mut t = txn.open_table(CONSENTS)?;
            let mut consent: ConsentRecord = t
                .get((user_id, client))?
                .map(|v| codec::decode(v.value()))
                .transpose()?
                .ok_or_else(|| StoreError::NotFound(format!("{client:?} is not allowed")))?;
            consent.caps = caps;
            t.insert((user_id, client), codec::encode(&consent)?.as_slice())?;
        }
        self.commit(txn)?;
        Ok(())
    }

    /// What each app spent of everyone's credits: (client id, today, in all), by client id.
    pub fn app_spend_by_client(&self, day: u32) -> Result<Vec<(String, u64, u64)>, StoreError> {
        let txn = self.begin_read()?;
        let t = txn.open_table(APP_SPEND)?;
        let mut by: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
        for row in t.iter()? {
            let (k, v) = row?;
            let spend: AppSpend = codec::decode(v.value())?;
            let e = by.entry(k.value().1.to_string()).or_default();
            e.0 += spend.today_on(day);
            e.1 += spend.total;
        }
        Ok(by.into_iter().map(|(c, (d, t))| (c, d, t)).collect())
    }

    /// What each app spent of the user's credits, by client id.
    pub fn app_spend(&self, user_id: u64) -> Result<Vec<(String, AppSpend)>, StoreError> {
        let txn = self.begin_read()?;
        let t = txn.open_table(APP_SPEND)?;
        let mut out = Vec::new();
        for row in t.range((user_id, "")..)? {
            let (k, v) = row?;
            let (uid, client) = k.value();
            if uid != user_id {
                break;
            }
            out.push((client.to_string(), codec::decode(v.value())?));
        }
        Ok(out)
    }

    /// Signing keys, newest first.
    pub fn signing_keys(&self) -> Result<Vec<SigningKeyRecord>, StoreError> {
        let txn = self.begin_read()?;
        let t = txn.open_table(SIGNING_KEYS)?;
        let mut out: Vec<SigningKeyRecord> = Vec::new();
        for row in t.iter()? {
            out.push(codec::decode(row?.1.value())?);
        }
        out.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.kid.cmp(&a.kid)));
        Ok(out)
    }

    /// Rewrites one signing key's record as it is (sealing a key stored in plain text).
    pub fn put_signing_key(&self, key: SigningKeyRecord) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        txn.open_table(SIGNING_KEYS)?
            .insert(key.kid.as_str(), codec::encode(&key)?.as_slice())?;
        self.commit(txn)?;
        self.keys_changed();
        Ok(())
    }

    /// Adds a new signing key and retires the previous current one.
    pub fn add_signing_key(&self, key: SigningKeyRecord, now: Millis) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        {
            let mut t = txn.open_table(SIGNING_KEYS)?;
            let mut current: Vec<SigningKeyRecord> = Vec::new();
            for row in t.iter()? {
                let rec: SigningKeyRecord = codec::decode(row?.1.value())?;
                if rec.retired_at.is_none() {
                    current.push(rec);
                }
            }
            for mut rec in current {
                rec.retired_at = Some(now);
                t.insert(rec.kid.as_str(), codec::encode(&rec)?.as_slice())?;
            }
            t.insert(key.kid.as_str(), codec::encode(&key)?.as_slice())?;
        }
        self.commit(txn)?;
        self.keys_changed();
        Ok(())
    }

    /// Deletes expired codes, long-expired tokens and retired keys no token can still need.
    pub fn purge_oauth(&self, now: Millis) -> Result<usize, StoreError> {
        let txn = self.begin_write()?;
        let mut removed = 0;
        let keys_removed;
        {
            // Codes are kept a day past expiry so a late replay is still recognised.
            let mut codes = txn.open_table(AUTH_CODES)?;
            removed += codes
                .extract_if(|_, v| {
                    codec::decode::<CodeRecord>(v)
                        .map(|c| now > c.expires_at + 86_400_000)
                        .unwrap_or(true)
                })?
                .count();
            let mut access = txn.open_table(ACCESS_TOKENS)?;
            removed += access
                .extract_if(|_, v| {
                    codec::decode::<AccessRecord>(v)
                        .map(|a| now > a.expires_at)
                        .unwrap_or(true)
                })?
                .count();
            let mut refresh = txn.open_table(REFRESH_TOKENS)?;
            removed += refresh
                .extract_if(|_, v| {
                    codec::decode::<RefreshRecord>(v)
                        .map(|r| now > r.expires_at)
                        .unwrap_or(true)
                })?
                .count();
            // An id_token lives as long as an access token; keep retired keys a day past that.
            let mut keys = txn.open_table(SIGNING_KEYS)?;
            keys_removed = keys
                .extract_if(|_, v| {
                    codec::decode::<SigningKeyRecord>(v)
                        .map(|k| {
                            k.retired_at
                                .is_some_and(|r| now > r + ACCESS_TTL_MS + 86_400_000)
                        })
                        .unwrap_or(false)
                })?
                .count();
            removed += keys_removed;
        }
        self.commit(txn)?;
        if keys_removed > 0 {
            self.keys_changed();
        }
        Ok(removed)
    }
}

/// [`Store::refresh`]'s transaction (see `write_combined`: it may run twice).
fn refresh_in(
    txn: &WriteTransaction,
    refresh_hash: [u8; 32],
    client: &str,
    requested_scope: Option<&str>,
    tokens: &NewTokens,
    now: Millis,
) -> Result<Issued, GrantError> {
    let Some(mut old) = get::<RefreshRecord>(txn, REFRESH_TOKENS, &refresh_hash)? else {
        return Err(GrantError::InvalidGrant(
            "the refresh token is invalid".into(),
        ));
    };
    if old.client != client {
        return Err(GrantError::InvalidGrant(
            "the refresh token was issued to another client".into(),
        ));
    }
    let family = read_family(txn, old.family)?;
    let Some(family) = family.filter(|f| f.revoked_at.is_none()) else {
        return Err(GrantError::InvalidGrant(
            "the refresh token has been revoked".into(),
        ));
    };
    if old.rotated_at.is_some() {
        revoke_family_in(txn, old.family, "rotated refresh token reused", now)?;
        return Err(GrantError::InvalidGrant(
            "the refresh token was already used; all tokens of this grant are revoked".into(),
        ));
    }
    if old.revoked_at.is_some() {
        return Err(GrantError::InvalidGrant(
            "the refresh token has been revoked".into(),
        ));
    }
    if now >= old.expires_at {
        return Err(GrantError::InvalidGrant(
            "the refresh token has expired".into(),
        ));
    }
    let scope = match requested_scope.map(str::trim).filter(|s| !s.is_empty()) {
        Some(req) if !scope_subset(req, &old.scope) => {
            return Err(GrantError::InvalidScope(
                "the requested scope exceeds the original grant".into(),
            ));
        }
        Some(req) => req.to_string(),
        None => old.scope.clone(),
    };
    old.rotated_at = Some(now);
    put(txn, REFRESH_TOKENS, &refresh_hash, &old)?;
    let tokens = NewTokens {
        family: old.family,
        ..*tokens
    };
    issue_in(
        txn,
        &tokens,
        client,
        old.user_id,
        &scope,
        family.auth_time,
        false,
        now,
    )?;
    Ok(Issued {
        user_id: old.user_id,
        scope,
        nonce: None,
        auth_time: family.auth_time,
        family: old.family,
    })
}
