//! `/setup/github`: the GitHub App manifest flow. A person arrives with a
//! one-time link (`forgehand setup github` prints it) or signs in with the
//! operator token; the page holds a form that posts Forgehand's App
//! manifest to GitHub with a `state` in its action; GitHub sends the
//! browser back to `/setup/github/callback` with a code and that state;
//! the code becomes the App's id, key and webhook secret, stored
//! owner-only and used at once; the page links to the App's install page.

mod page;
mod sessions;

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Form;
use secrecy::ExposeSecret;
use serde::Deserialize;
use subtle::ConstantTimeEq;

pub use sessions::Sessions;

use super::AppState;
use crate::config::Config;
use crate::github_app::{self, links};

const COOKIE: &str = "forgehand_setup";

#[derive(Deserialize)]
pub struct PageQuery {
    link: Option<String>,
}

#[derive(Deserialize)]
pub struct SignIn {
    token: String,
}

#[derive(Deserialize)]
pub struct Callback {
    code: Option<String>,
    state: Option<String>,
}

/// `GET /setup/github`: takes a one-time link, or shows the page of the
/// session the browser holds, or the sign-in form.
pub async fn page(
    State(state): State<AppState>,
    Query(query): Query<PageQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(config) = live_config(&state) else {
        return not_here();
    };
    if let Some(link) = query.link {
        return match links::consume(&config.github.app_dir, &link, crate::time::now_ms() / 1000) {
            // A session of its own, and the link off the address bar at
            // once (it would travel on as a Referer).
            Ok(grant) => {
                let session = state.setup_sessions.open(grant.name, grant.org);
                signed_in(&config, &session)
            }
            Err(error) => respond(
                StatusCode::FORBIDDEN,
                &config,
                page::message("Link refused", &error.to_string()),
            ),
        };
    }
    let Some(session) = session_of(&headers) else {
        return respond(
            StatusCode::OK,
            &config,
            page::sign_in(config.api.token.is_some()),
        );
    };
    if let Some(done) = already_set_up(&config) {
        return respond(StatusCode::OK, &config, done);
    }
    let Some(opened) = state.setup_sessions.begin(&session) else {
        return respond(
            StatusCode::OK,
            &config,
            page::sign_in(config.api.token.is_some()),
        );
    };
    let Some(public_url) = config.server.public_url() else {
        return respond(
            StatusCode::SERVICE_UNAVAILABLE,
            &config,
            page::message(
                "server.public_url is not set",
                "GitHub needs the address it reaches Forgehand at: set server.public_url and restart.",
            ),
        );
    };
    let manifest = forgehand_forge::admin::github::Manifest::forgehand(
        &opened.name,
        public_url,
        &format!("{public_url}/setup/github/callback"),
    );
    respond(
        StatusCode::OK,
        &config,
        page::manifest_form(
            config.github.web_url(),
            opened.org.as_deref(),
            &opened.state,
            &manifest,
        ),
    )
}

/// `POST /setup/github`: the operator token, in a form (never in an
/// address), opens a session.
pub async fn sign_in(State(state): State<AppState>, Form(form): Form<SignIn>) -> Response {
    let Some(config) = live_config(&state) else {
        return not_here();
    };
    let accepted = config.api.token.as_ref().is_some_and(|t| {
        bool::from(
            form.token
                .trim()
                .as_bytes()
                .ct_eq(t.expose_secret().as_bytes()),
        )
    });
    if !accepted {
        return respond(
            StatusCode::FORBIDDEN,
            &config,
            page::message(
                "Not signed in",
                "That is not the operator token (api.token).",
            ),
        );
    }
    let session = state.setup_sessions.open(config.bot.username.clone(), None);
    signed_in(&config, &session)
}

/// `GET /setup/github/callback`: GitHub's redirect after the App was
/// created, with the code to exchange and the state the form carried.
pub async fn callback(
    State(state): State<AppState>,
    Query(query): Query<Callback>,
    headers: HeaderMap,
) -> Response {
    let (Some(config), Some(live)) = (live_config(&state), state.live.clone()) else {
        return not_here();
    };
    let refused = |why: &str| {
        respond(
            StatusCode::FORBIDDEN,
            &config,
            page::message("Set-up refused", why),
        )
    };
    let (Some(code), Some(returned)) = (query.code, query.state) else {
        return respond(
            StatusCode::BAD_REQUEST,
            &config,
            page::message(
                "Nothing to do",
                "GitHub sends a code and a state here; this request has neither.",
            ),
        );
    };
    let Some(session) = session_of(&headers) else {
        return refused("this browser has no set-up session: open the link `forgehand setup github` printed, in this browser");
    };
    if !state.setup_sessions.finish(&session, &returned) {
        return refused("the state does not match the set-up this browser started (or it was used, or it expired): start again from /setup/github");
    }
    if let Some(done) = already_set_up(&config) {
        return respond(StatusCode::CONFLICT, &config, done);
    }
    let created =
        match forgehand_forge::admin::github::convert_manifest(&config.github.api_url, &code).await
        {
            Ok(created) => created,
            Err(error) => {
                tracing::warn!(%error, "exchanging the App manifest's code failed");
                return respond(
                    StatusCode::BAD_GATEWAY,
                    &config,
                    page::message("GitHub did not hand over the App", &error.to_string()),
                );
            }
        };
    let stored = match github_app::save(&config.github.app_dir, &created) {
        Ok(stored) => stored,
        Err(error) => {
            tracing::error!(%error, dir = %config.github.app_dir.display(), "storing the new GitHub App failed");
            return respond(
                StatusCode::INTERNAL_SERVER_ERROR,
                &config,
                page::message(
                    "The App was created but could not be stored",
                    &format!("{error} (in {}). Delete the App on GitHub and start again once the directory is writable.", config.github.app_dir.display()),
                ),
            );
        }
    };
    if let Err(error) = live.use_app(&stored) {
        tracing::error!(%error, "the new GitHub App is stored but could not be used");
        return respond(
            StatusCode::INTERNAL_SERVER_ERROR,
            &config,
            page::message(
                "The App is stored but not in use",
                &format!("{error:#}. Restart forgehand serve to use it."),
            ),
        );
    }
    tracing::info!(app_id = stored.id, slug = %stored.slug, "GitHub App created from the manifest; in use now");
    respond(
        StatusCode::OK,
        &config,
        page::created(&stored, &config.bot.username),
    )
}

fn live_config(state: &AppState) -> Option<Config> {
    state.live.as_ref().map(|live| live.config())
}

fn not_here() -> Response {
    (
        StatusCode::NOT_FOUND,
        "this node does not serve the set-up pages\n",
    )
        .into_response()
}

/// The page for an App this node already signs in as, if any.
fn already_set_up(config: &Config) -> Option<String> {
    let app_id = config.github.app_id?;
    let stored = github_app::load(&config.github.app_dir).ok().flatten();
    Some(page::already(app_id, stored.as_ref()))
}

/// The session token the browser presented.
fn session_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// Sets the session's cookie and sends the browser to the page.
fn signed_in(config: &Config, session: &str) -> Response {
    let secure = config
        .server
        .public_url()
        .is_some_and(|u| u.starts_with("https://"));
    let cookie = format!(
        "{COOKIE}={session}; Path=/setup/github; HttpOnly; SameSite=Lax; Max-Age={}{}",
        sessions::SESSION_TTL.as_secs(),
        if secure { "; Secure" } else { "" }
    );
    let mut response =
        (StatusCode::SEE_OTHER, [(header::LOCATION, "/setup/github")]).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    guard(&mut response, config);
    response
}

fn respond(status: StatusCode, config: &Config, html: String) -> Response {
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        html,
    )
        .into_response();
    guard(&mut response, config);
    response
}

/// Pages that hold a set-up session are never cached, framed, or told to
/// another site; the only place a form may post to is GitHub.
fn guard(response: &mut Response, config: &Config) {
    let headers = response.headers_mut();
    let policy = format!(
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' {}; frame-ancestors 'none'; base-uri 'none'",
        config.github.web_url()
    );
    for (name, value) in [
        (header::CACHE_CONTROL, "no-store".to_owned()),
        (header::REFERRER_POLICY, "no-referrer".to_owned()),
        (header::X_FRAME_OPTIONS, "DENY".to_owned()),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
        (header::CONTENT_SECURITY_POLICY, policy),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
}
