//! The profile: the name shown to apps, and the profile picture (upload, remove).

use poem::http::StatusCode;
use poem::web::cookie::CookieJar;
use poem::web::{Data, Multipart};
use poem::{Request, Response, handler};
use rand::RngExt;
use serde::Deserialize;

use crate::state::AppState;
use crate::store::StoreError;
use crate::web::server_error;
use crate::web::{csrf_ok, redirect};

use super::{Empty, Extras, MAX_AVATAR_BYTES, render};
use crate::web::{CheckedForm, Member, PageError};

#[derive(Deserialize)]
pub struct ProfileForm {
    #[serde(default)]
    name: String,
}

#[handler]
pub async fn profile_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<ProfileForm>,
    Member(s): Member,
) -> Response {
    let name = f.name.trim().to_string();
    if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
        return render(
            &state,
            jar,
            &s.user,
            Extras::error("profile", crate::web::i18n::tr("profile.bad_name")),
            StatusCode::BAD_REQUEST,
        );
    }
    let uid = s.user.id;
    match state
        .store
        .call(move |st| {
            st.modify_user(uid, |u| {
                u.name = name;
                Ok(())
            })
        })
        .await
    {
        Ok(_) => redirect("/account?done=name"),
        Err(e) => server_error(&state, "saving a name", e),
    }
}

/// Reads at most `limit` bytes of a multipart field; `None` when it is longer.
async fn read_field(
    field: poem::web::Field,
    limit: usize,
) -> Result<Option<Vec<u8>>, std::io::Error> {
    use tokio::io::AsyncReadExt;
    let reader = field.into_async_read();
    tokio::pin!(reader);
    let mut buf = Vec::new();
    reader.take(limit as u64 + 1).read_to_end(&mut buf).await?;
    Ok((buf.len() <= limit).then_some(buf))
}

enum AvatarUpload {
    Parsed { csrf: String, file: Option<Vec<u8>> },
    TooLarge { csrf: String },
    Broken,
}

async fn read_avatar_upload(mut multipart: Multipart) -> AvatarUpload {
    let mut csrf = String::new();
    let mut file = None;
    // A browser sends two fields; a few more are tolerated and skipped.
    for _ in 0..16 {
        let field = match multipart.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => return AvatarUpload::Parsed { csrf, file },
            Err(_) => return AvatarUpload::Broken,
        };
        match field.name().unwrap_or_default() {
            "csrf" => match read_field(field, 256).await {
                Ok(Some(b)) => csrf = String::from_utf8(b).unwrap_or_default(),
                _ => return AvatarUpload::Broken,
            },
            "avatar" | "image" | "file" => match read_field(field, MAX_AVATAR_BYTES).await {
                Ok(Some(b)) => file = Some(b),
                Ok(None) => return AvatarUpload::TooLarge { csrf },
                Err(_) => return AvatarUpload::Broken,
            },
            _ => drop(field),
        }
    }
    AvatarUpload::Parsed { csrf, file }
}

#[handler]
pub async fn avatar_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    // Signed-out browsers and foreign origins are turned away before the upload is read.
    Member(s): Member,
    multipart: poem::Result<Multipart>,
) -> Response {
    if !crate::web::origin_ok(&state, req) {
        return PageError::FormExpired.render();
    }
    let upload = match multipart {
        Ok(m) => read_avatar_upload(m).await,
        Err(_) => AvatarUpload::Broken,
    };
    let (csrf, file) = match upload {
        AvatarUpload::Parsed { csrf, file } => (csrf, Ok(file)),
        AvatarUpload::TooLarge { csrf } => (csrf, Err(StatusCode::PAYLOAD_TOO_LARGE)),
        AvatarUpload::Broken => (String::new(), Err(StatusCode::BAD_REQUEST)),
    };
    if !csrf_ok(&state, req, jar, &csrf) {
        return PageError::FormExpired.render();
    }
    let refuse =
        |msg: &str, status| render(&state, jar, &s.user, Extras::error("avatar", msg), status);
    let bytes = match file {
        Ok(Some(b)) if !b.is_empty() => b,
        Ok(_) => {
            return refuse(
                crate::web::i18n::tr("profile.choose"),
                StatusCode::BAD_REQUEST,
            );
        }
        Err(StatusCode::PAYLOAD_TOO_LARGE) => {
            return refuse(
                crate::web::i18n::tr("profile.too_large"),
                StatusCode::PAYLOAD_TOO_LARGE,
            );
        }
        Err(status) => return refuse(crate::web::i18n::tr("profile.unreadable"), status),
    };
    let png = match state
        .decode_pool
        .spawn(move || crate::render::avatar::avatar_png(&bytes))
        .await
    {
        Ok(Ok(png)) => png,
        Ok(Err(crate::render::RenderError::InvalidImage(m))) => {
            return refuse(
                &crate::web::i18n::tr1("profile.unusable", m),
                StatusCode::BAD_REQUEST,
            );
        }
        Ok(Err(e)) => return server_error(&state, "resizing an avatar", e),
        Err(e) => return server_error(&state, "resizing an avatar", e),
    };
    let dir = state.config.data_dir.join("avatars");
    let token = hex::encode(rand::rng().random::<[u8; 16]>());
    let path = dir.join(format!("{token}.png"));
    let written = async {
        tokio::fs::create_dir_all(&dir).await?;
        tokio::fs::write(&path, &png).await
    }
    .await;
    if let Err(e) = written {
        return server_error(&state, "writing an avatar", e);
    }
    let uid = s.user.id;
    let new_token = token.clone();
    let old = state
        .store
        .call(move |st| {
            let mut old = None;
            st.modify_user(uid, |u| {
                old = u.avatar.replace(new_token);
                Ok(())
            })?;
            Ok::<_, StoreError>(old)
        })
        .await;
    match old {
        Ok(old) => {
            remove_avatar_file(&state, old).await;
            redirect("/account?done=avatar")
        }
        Err(e) => {
            let _ = tokio::fs::remove_file(&path).await;
            server_error(&state, "saving an avatar", e)
        }
    }
}

async fn remove_avatar_file(state: &AppState, token: Option<String>) {
    if let Some(t) = token.filter(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit())) {
        let path = state
            .config
            .data_dir
            .join("avatars")
            .join(format!("{t}.png"));
        if let Err(e) = tokio::fs::remove_file(&path).await
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(error = %e, "removing an old avatar");
        }
    }
}

#[handler]
pub async fn avatar_remove_post(
    _req: &Request,
    state: Data<&AppState>,
    _jar: &CookieJar,
    CheckedForm(Empty {}): CheckedForm<Empty>,
    Member(s): Member,
) -> Response {
    let uid = s.user.id;
    let old = state
        .store
        .call(move |st| {
            let mut old = None;
            st.modify_user(uid, |u| {
                old = u.avatar.take();
                Ok(())
            })?;
            Ok::<_, StoreError>(old)
        })
        .await;
    match old {
        Ok(old) => {
            remove_avatar_file(&state, old).await;
            redirect("/account?done=avatar-removed")
        }
        Err(e) => server_error(&state, "removing an avatar", e),
    }
}
