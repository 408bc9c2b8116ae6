//! The apps the person signed in to: what they may do, what they spent, their spending limits,
//! and withdrawing their access.

use std::collections::HashMap;

use poem::http::StatusCode;
use poem::web::Data;
use poem::web::cookie::CookieJar;
use poem::{Request, Response, handler};
use serde::Deserialize;

use crate::clock::Millis;
use crate::state::AppState;
use crate::store::StoreError;
use crate::web::redirect;
use crate::web::server_error;

use super::{AppView, Extras, SpendingView, date_of, render};
use crate::web::{CheckedForm, Member};

/// The apps the user has authorized: live grants, one entry per app (newest first), with every
/// scope granted, then apps with a remembered consent but no live grant.
pub(super) fn apps_of(state: &AppState, user_id: u64, now: Millis) -> Vec<AppView> {
    let grants = match state.store.user_grants(user_id, now) {
        Ok(g) => g,
        Err(e) => {
            tracing::error!(error = %e, "reading a user's grants");
            Vec::new()
        }
    };
    let mut apps: Vec<(AppView, Millis)> = Vec::new();
    for fam in grants {
        let idx = match apps.iter().position(|(a, _)| a.client == fam.client) {
            Some(i) => i,
            None => {
                apps.push((
                    AppView {
                        client: fam.client.clone(),
                        scopes: Vec::new(),
                        since: String::new(),
                        spending: None,
                    },
                    fam.created_at,
                ));
                apps.len() - 1
            }
        };
        let (app, since) = &mut apps[idx];
        *since = (*since).min(fam.created_at);
        for scope in fam.scope.split(' ').filter(|s| !s.is_empty()) {
            let words = crate::idp::authorize::scope_text(scope);
            if !app.scopes.contains(&words) {
                app.scopes.push(words);
            }
        }
    }
    // Apps consented to whose code was never exchanged have no grant yet, but their consent is
    // remembered: list them too, so that it can be withdrawn.
    for client in state.store.clients().unwrap_or_default() {
        if apps.iter().any(|(a, _)| a.client == client.name) {
            continue;
        }
        if let Ok(Some(consent)) = state.store.consent(user_id, &client.name) {
            let mut scopes: Vec<&'static str> = Vec::new();
            for scope in &consent.scopes {
                let words = crate::idp::authorize::scope_text(scope);
                if !scopes.contains(&words) {
                    scopes.push(words);
                }
            }
            apps.push((
                AppView {
                    client: client.name,
                    scopes,
                    since: String::new(),
                    spending: None,
                },
                consent.granted_at,
            ));
        }
    }
    let spent = state.store.app_spend(user_id).unwrap_or_default();
    let day = crate::clock::day_of(now);
    apps.into_iter()
        .map(|(mut app, since)| {
            app.since = date_of(since);
            let consent = state.store.consent(user_id, &app.client).ok().flatten();
            if let Some(consent) =
                consent.filter(|c| c.scopes.iter().any(|s| s == "images:generate"))
            {
                let spend = spent
                    .iter()
                    .find(|(c, _)| *c == app.client)
                    .map(|(_, s)| *s)
                    .unwrap_or_default();
                let shown = |v: Option<u32>| v.map(|n| n.to_string()).unwrap_or_default();
                app.spending = Some(SpendingView {
                    today: spend.today_on(day),
                    total: spend.total,
                    cap_daily: shown(consent.caps.daily),
                    cap_total: shown(consent.caps.total),
                });
            }
            app
        })
        .collect()
}

#[derive(Deserialize)]
pub struct RevokeForm {
    #[serde(default)]
    client: String,
}

#[handler]
pub async fn revoke_app_post(
    state: Data<&AppState>,
    _jar: &CookieJar,
    CheckedForm(f): CheckedForm<RevokeForm>,
    Member(s): Member,
) -> Response {
    let uid = s.user.id;
    let now = state.clock.now();
    let client = f.client.clone();
    match state
        .store
        .call(move |st| st.revoke_client_for_user(uid, &client, now))
        .await
    {
        Ok(n) => {
            tracing::info!(user = %s.user.user_id(), client = %f.client, grants = n, "app revoked by the user");
            redirect("/account?done=revoked")
        }
        Err(e) => server_error(&state, "revoking an app", e),
    }
}

/// `POST /account/apps/limits`: the person changes an app's spending limits (empty: none).
#[handler]
pub async fn app_limits_post(
    _req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(params): CheckedForm<HashMap<String, String>>,
    Member(s): Member,
) -> Response {
    let caps = match crate::idp::authorize::spend_caps(&params) {
        Ok(c) => c,
        Err(message) => {
            return render(
                &state,
                jar,
                &s.user,
                Extras::error("apps", message),
                StatusCode::BAD_REQUEST,
            );
        }
    };
    let client = params.get("client").cloned().unwrap_or_default();
    let uid = s.user.id;
    match state
        .store
        .call(move |st| st.set_app_caps(uid, &client, caps))
        .await
    {
        Ok(()) => redirect("/account?done=limits"),
        Err(StoreError::NotFound(_)) => render(
            &state,
            jar,
            &s.user,
            Extras::error("apps", crate::web::i18n::tr("apps.no_access")),
            StatusCode::NOT_FOUND,
        ),
        Err(e) => server_error(&state, "saving an app's limits", e),
    }
}
