/*! Pictor sign-in SDK. Renders a "Sign in with Pictor" button and starts the OAuth 2.0
 *  authorization code flow (with PKCE when the page passes a code challenge). It never sees the
 *  client secret: the application's own server exchanges the code.
 *
 *  new PictorLogin({ issuer, appName, redirectUri, display: "redirect" | "popup",
 *                    scope?, state?, nonce?, codeChallenge?, label?, lang? }).render(elementOrSelector)
 *  The button reads `label` if given, else "Sign in with Pictor" in the language `lang` names
 *  ("ru" gives "Войти через Pictor"; other languages get the English), else in the host page's
 *  <html lang>, else in the browser's (navigator.language).
 *  On the callback page, after the server has handled the code: PictorLogin.finishPopup()
 *  closes the popup and reloads the page that opened it (no-op when not in a popup).
 *  Signing out (RP-initiated logout): login.signOut({ idToken?, postLogoutRedirectUri?, state? })
 *  ends the person's Pictor session and comes back to postLogoutRedirectUri (which must be
 *  registered for the app) with state; signOutUrl(...) gives the URL without going there.
 */
(function (global) {
  "use strict";

  var POPUP_NAME = "pictor-login";

  function randomString(bytes) {
    var a = new Uint8Array(bytes);
    global.crypto.getRandomValues(a);
    return Array.prototype.map.call(a, function (b) { return ("0" + b.toString(16)).slice(-2); }).join("");
  }

  function toQuery(params) {
    return Object.keys(params).map(function (k) {
      return encodeURIComponent(k) + "=" + encodeURIComponent(params[k]);
    }).join("&");
  }

  /** The button's label in each language the SDK knows (by the primary subtag). */
  var LABELS = { en: "Sign in with Pictor", ru: "Войти через Pictor" };

  /** The label for `lang` (the option), else the host page's language, else the browser's. */
  function defaultLabel(lang) {
    var doc = global.document;
    var candidates = [
      lang,
      doc && doc.documentElement ? doc.documentElement.getAttribute("lang") : null,
      global.navigator ? global.navigator.language : null
    ];
    for (var i = 0; i < candidates.length; i++) {
      var code = String(candidates[i] || "").trim().toLowerCase().split(/[-_]/)[0];
      if (code) return LABELS[code] || LABELS.en;
    }
    return LABELS.en;
  }

  function PictorLogin(options) {
    if (!(this instanceof PictorLogin)) return new PictorLogin(options);
    options = options || {};
    if (!options.issuer || !options.appName || !options.redirectUri) {
      throw new Error("PictorLogin needs issuer, appName and redirectUri");
    }
    if (options.appSecret || options.clientSecret) {
      throw new Error("PictorLogin must not be given the app secret: keep it on your server");
    }
    this.issuer = String(options.issuer).replace(/\/+$/, "");
    this.appName = options.appName;
    this.redirectUri = options.redirectUri;
    this.display = options.display === "popup" ? "popup" : "redirect";
    this.scope = options.scope || "openid profile email";
    this.state = options.state || null;
    this.nonce = options.nonce || null;
    this.codeChallenge = options.codeChallenge || null;
    this.label = options.label || defaultLabel(options.lang);
  }

  PictorLogin.prototype.authorizeUrl = function () {
    var state = this.state;
    if (!state) {
      // Kept for the callback page to compare (a server-provided state is better).
      state = randomString(16);
      try { global.sessionStorage.setItem("pictor-login-state", state); } catch (e) { /* storage off */ }
    }
    var params = {
      response_type: "code",
      client_id: this.appName,
      redirect_uri: this.redirectUri,
      scope: this.scope,
      state: state,
      display: this.display === "popup" ? "popup" : "page"
    };
    if (this.nonce) params.nonce = this.nonce;
    if (this.codeChallenge) {
      params.code_challenge = this.codeChallenge;
      params.code_challenge_method = "S256";
    }
    return this.issuer + "/oauth/authorize?" + toQuery(params);
  };

  /** The RP-initiated logout URL (end_session_endpoint). With the id_token the app received,
   *  Pictor signs its holder out without asking; without one it asks first. */
  PictorLogin.prototype.signOutUrl = function (options) {
    options = options || {};
    var params = { client_id: this.appName };
    if (options.idToken) params.id_token_hint = options.idToken;
    if (options.postLogoutRedirectUri) params.post_logout_redirect_uri = options.postLogoutRedirectUri;
    if (options.state) params.state = options.state;
    return this.issuer + "/oauth/logout?" + toQuery(params);
  };

  /** Goes to Pictor's logout (see signOutUrl). */
  PictorLogin.prototype.signOut = function (options) {
    global.location.assign(this.signOutUrl(options));
  };

  PictorLogin.prototype.start = function () {
    var url = this.authorizeUrl();
    if (this.display === "popup") {
      var w = 480, h = 680;
      var left = (global.screenX || 0) + Math.max(0, ((global.outerWidth || w) - w) / 2);
      var top = (global.screenY || 0) + Math.max(0, ((global.outerHeight || h) - h) / 2);
      var popup = global.open(url, POPUP_NAME, "width=" + w + ",height=" + h + ",left=" + left + ",top=" + top);
      if (popup) { popup.focus(); return popup; }
      // Popup blocked: fall back to a full-page redirect.
    }
    global.location.assign(url);
    return null;
  };

  PictorLogin.prototype.render = function (target) {
    var el = typeof target === "string" ? global.document.querySelector(target) : target;
    if (!el) throw new Error("PictorLogin.render: no such element");
    var self = this;
    var button = global.document.createElement("button");
    button.type = "button";
    button.className = "pictor-login-button";
    button.setAttribute("data-pictor-login", "");
    button.textContent = this.label;
    button.style.cssText = "display:inline-flex;align-items:center;gap:.5em;padding:.6em 1.1em;border-radius:8px;" +
      "border:1px solid #4b4fd6;background:#4b4fd6;color:#fff;font:600 1rem system-ui,sans-serif;cursor:pointer;min-height:44px";
    button.addEventListener("click", function () { self.start(); });
    el.appendChild(button);
    return button;
  };

  /** On the callback page: in a popup, reload the opener and close; returns true if it did. */
  PictorLogin.finishPopup = function () {
    // window.name is a hint only: browsers may clear it on cross-site navigations.
    if (global.opener && !global.opener.closed) {
      try { global.opener.location.reload(); } catch (e) { /* cross-origin opener */ }
      global.close();
      return true;
    }
    return false;
  };

  global.PictorLogin = PictorLogin;
})(typeof window !== "undefined" ? window : this);
