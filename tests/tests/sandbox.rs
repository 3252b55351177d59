//! The code-customization sandbox on its own: the helpers as scripts see them, a token we mint
//! checked by an independent library against our JWKS, and the hostile-script suite: each one
//! contained with a clear error, and the next run unaffected.

use rp_shared::domain::code::RunReport;
use rp_shared::sandbox::{self, helpers, Job, JwtSigner, OneKey};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A signer with one fresh key, its `kid` the key's thumbprint.
fn keys() -> Arc<OneKey> {
    let key = p256::ecdsa::SigningKey::random(&mut rand::rngs::OsRng);
    let kid = rp_shared::domain::signing::key_id(&key.verifying_key().into());
    Arc::new(OneKey { kid, key })
}

/// A job of a tenant of its own: runs are scheduled per tenant, and these tests run at once.
fn job(source: &str, timeout_ms: u64) -> Job {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    Job {
        tenant: format!("tenant-{}", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)),
        source: source.to_owned(),
        event: json!({"namedUser": "alice@example.com", "machineId": "m-1"}),
        env: BTreeMap::from([
            ("RISK_ISSUER".to_owned(), "https://risk.example.com".to_owned()),
            ("WEBHOOK_SECRET".to_owned(), "whsec_0123456789abcdef".to_owned()),
        ]),
        issuer: "https://rp.example.com/rp/api/apps/demo".into(),
        timeout: Duration::from_millis(timeout_ms),
        memory_bytes: sandbox::DEFAULT_MEMORY_BYTES,
    }
}

async fn run(source: &str) -> RunReport {
    sandbox::run(keys(), job(source, 1_000)).await
}

#[tokio::test]
async fn a_handler_sees_event_env_and_helpers() {
    let r = run(r#"
        async function handler(event, api) {
            console.log('user', event.namedUser, {n: 1});
            return {
                user: event.namedUser,
                sha: sha256('abc'),
                shaBytes: sha256([0x61, 0x62, 0x63]),
                hmac: getHmacSHA256Signature('Jefe', 'what do ya want for nothing?'),
                b64: base64EncodeToString('foobar'),
                b64Bytes: base64EncodeToString(new Uint8Array([102, 111, 111])),
                issuerSet: env.RISK_ISSUER.length > 0,
            };
        }"#)
    .await;
    assert_eq!(r.error, None, "{r:?}");
    assert_eq!(r.result["user"], "alice@example.com");
    assert_eq!(r.result["sha"], "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_eq!(r.result["shaBytes"], r.result["sha"]);
    assert_eq!(r.result["hmac"], "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    assert_eq!((r.result["b64"].as_str(), r.result["b64Bytes"].as_str()), (Some("Zm9vYmFy"), Some("Zm9v")));
    assert_eq!(r.result["issuerSet"], true);
    assert_eq!(r.logs, ["user alice@example.com {\"n\":1}"]);
}

/// `t(f)`, for a script: what `f` returns, as text, or `threw: ` and the message it throws.
const TRY: &str =
    "const t = (f) => { try { return String(f()); } catch (e) { return 'threw: ' + e.message; } };";

/// The helpers check what a script hands them: the 1 MiB bound is inclusive, and what is not a
/// string or bytes throws, saying so; options left `undefined` are no options.
#[tokio::test]
async fn helpers_check_their_inputs() {
    let r = run(&format!(
        r#"{TRY}
        function handler() {{
            return [
                t(() => sha256('x'.repeat(1 << 20)).length),
                t(() => sha256('x'.repeat((1 << 20) + 1))),
                t(() => sha256({{}})),
                t(() => sha256([256])),
                t(() => getHmacSHA256Signature('k', [1.5])),
                t(() => base64EncodeToString([-1])),
                t(() => jwtCreateSignedJwt({{sub: 'x'}}, undefined).split('.').length),
                t(() => jwtVerify('a.b.c', {{secrett: 'k'}})).startsWith('threw: jwtVerify options: unknown field `secrett`'),
            ];
        }}"#
    ))
    .await;
    assert_eq!(r.error, None, "{r:?}");
    assert_eq!(
        r.result,
        json!([
            "64",
            "threw: sha256: at most 1048576 bytes",
            "threw: sha256: must be a string or an array of bytes",
            "threw: sha256: byte 0 is not 0 to 255",
            "threw: getHmacSHA256Signature: byte 0 is not 0 to 255",
            "threw: base64EncodeToString: byte 0 is not 0 to 255",
            "3",
            true,
        ])
    );
}

/// A token past the 1 MiB bound does not verify, though its signature is good: `jwtVerify`
/// answers `false` and `jwtDecodeVerify` throws, neither reading it.
#[tokio::test]
async fn a_token_past_the_bound_does_not_verify() {
    let exp = jsonwebtoken::get_current_timestamp() + 600;
    let sign = |pad: usize| {
        let claims = json!({"exp": exp, "pad": "x".repeat(pad)});
        let key = jsonwebtoken::EncodingKey::from_secret(b"k");
        jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &key).unwrap()
    };
    let source = format!(
        "{TRY} function handler(e) {{ return [e.small, e.large].flatMap((token) => \
         [t(() => jwtVerify(token, {{secret: 'k'}})), t(() => jwtDecodeVerify(token, {{secret: 'k'}}).payload.exp)]); }}"
    );
    let mut verify = job(&source, 5_000);
    let (small, large) = (sign(1_000), sign(800 * 1024));
    assert!(large.len() > sandbox::MAX_HELPER_INPUT, "{}", large.len());
    verify.event = json!({"small": small, "large": large});
    let r = sandbox::run(keys(), verify).await;
    assert_eq!(r.error, None, "{r:?}");
    assert_eq!(
        r.result,
        json!(["true", exp.to_string(), "false", "threw: jwtDecodeVerify: at most 1048576 bytes"])
    );
}

/// What a hook asks for is at most 1000 characters: a longer transaction text throws, a longer
/// deny reason is cut.
#[tokio::test]
async fn a_hooks_texts_are_bounded() {
    let r = run(r#"
        function handler(e, api) {
            api.setTransactionText('é'.repeat(1000));
            let thrown = null;
            try { api.setTransactionText('x'.repeat(1001)); } catch (err) { thrown = err.message; }
            api.deny('n'.repeat(1500));
            return thrown;
        }"#)
    .await;
    assert_eq!(r.error, None, "{r:?}");
    assert_eq!(r.result, "setTransactionText: at most 1000 characters");
    assert_eq!(r.actions.transaction_text, Some("é".repeat(1000)), "the text of 1000 stays");
    assert_eq!(r.actions.denied, Some("n".repeat(1000)));
}

/// A hook's texts are strings: one of another kind is a `TypeError` naming the argument, and a
/// deny reason left `undefined` or `null` is none, as when it is left out.
#[tokio::test]
async fn a_hooks_texts_are_strings_and_a_missing_reason_is_none() {
    for (call, denied) in [
        ("api.deny(undefined)", Some("denied by a code customization")),
        ("api.deny(null)", Some("denied by a code customization")),
        ("api.deny()", Some("denied by a code customization")),
        ("api.deny('risky')", Some("risky")),
    ] {
        let r = run(&format!("function handler(e, api) {{ {call}; return 1; }}")).await;
        assert_eq!((r.error, r.actions.denied.as_deref()), (None, denied), "{call}");
    }
    for (call, error) in [
        ("api.deny(42)", "TypeError: deny: the reason must be a string"),
        ("api.deny({reason: 'x'})", "TypeError: deny: the reason must be a string"),
        ("api.setTransactionText(42)", "TypeError: setTransactionText: the text must be a string"),
        ("api.setTransactionText()", "TypeError: setTransactionText: the text must be a string"),
    ] {
        let r = run(&format!("function handler(e, api) {{ {call}; return 1; }}")).await;
        assert_eq!(r.error.as_deref(), Some(error), "{call}");
        assert_eq!((r.actions.denied, r.actions.transaction_text), (None, None), "{call}");
    }
}

/// Log lines past the bound are dropped, and the logs say how many.
#[tokio::test]
async fn logs_past_their_bound_are_counted() {
    let r =
        run("function handler() { for (let i = 0; i < 105; i++) console.log('line', i); return 1; }").await;
    assert_eq!(r.error, None, "{r:?}");
    assert_eq!(r.logs.len(), sandbox::MAX_LOG_LINES + 1);
    assert_eq!((r.logs[0].as_str(), r.logs[99].as_str()), ("line 0", "line 99"));
    assert_eq!(r.logs.last().map(String::as_str), Some("[5 more log lines dropped]"));
    let r = run("function handler() { console.log('one'); return 1; }").await;
    assert_eq!(r.logs, ["one"], "nothing dropped, nothing said");
}

/// `console.log` and a thrown non-Error write each value as JavaScript would: JSON where JSON
/// can, and `undefined`, a BigInt, a symbol or a function by what it is, not by its type's name;
/// a BigInt inside an object as a string that says so.
#[tokio::test]
async fn a_logged_or_thrown_value_is_written_as_javascript_would() {
    let r = run("function handler() { console.log('text', 1, {a: 1}, [1, 2], null, undefined, \
                 -12345678901234567890n, Symbol('s'), Symbol(), () => 1, {b: 2n}); throw undefined; }")
    .await;
    assert_eq!(
        r.logs,
        [
            r#"text 1 {"a":1} [1,2] null undefined -12345678901234567890n Symbol(s) Symbol() [Function] {"b":"2n"}"#
        ]
    );
    assert_eq!(r.error.as_deref(), Some("a non-Error value was thrown: undefined"));
}

/// What JSON cannot write inside a logged object is told as it is at the top: an error as
/// `name: message` (`console.log({error})` from a catch wrote `{"error":{}}`), a BigInt with its
/// `n`, and a reference back to an object that holds it as `[Circular]` (where the whole line was
/// `[Object]`). An object held twice, but not inside itself, is written twice; a thrown object
/// is told the same way.
#[tokio::test]
async fn a_logged_object_says_what_json_cannot_write() {
    let r = run("function handler() { \
                 try { null.x; } catch (error) { console.log('failed', {error, id: 7n, causes: [new RangeError('r')]}); } \
                 const shared = {k: 1}; const loop = {name: 'loop', shared, again: shared}; \
                 loop.self = loop; loop.list = [loop, {up: loop, shared}]; console.log(loop); \
                 throw {reason: new Error('no ' + env.WEBHOOK_SECRET), loop}; }")
    .await;
    assert_eq!(
        r.logs,
        [
            r#"failed {"error":"TypeError: cannot read property 'x' of null","id":"7n","causes":["RangeError: r"]}"#,
            r#"{"name":"loop","shared":{"k":1},"again":{"k":1},"self":"[Circular]","list":["[Circular]",{"up":"[Circular]","shared":{"k":1}}]}"#,
        ]
    );
    assert_eq!(
        r.error.as_deref(),
        Some(
            r#"a non-Error value was thrown: {"reason":"Error: no [env.WEBHOOK_SECRET]","loop":{"name":"loop","shared":{"k":1},"again":{"k":1},"self":"[Circular]","list":["[Circular]",{"up":"[Circular]","shared":{"k":1}}]}}"#
        )
    );
}

/// An error a script logs (`catch (e) { console.error('failed', e) }`) is written as a thrown one
/// is told, `name: message`, whatever threw it: the script, a helper or the engine; a secret in
/// its message is scrubbed as any log line's is.
#[tokio::test]
async fn a_logged_error_says_what_it_is() {
    let r = run("function handler() { class HookError extends Error { constructor(m) { super(m); this.name = 'HookError'; } } \
                 for (const f of [() => jwtDecodeJwt('x'), () => null.x, () => { throw new HookError('no ' + env.WEBHOOK_SECRET); }]) \
                 { try { f(); } catch (e) { console.error('failed', e); } } return 1; }")
    .await;
    assert_eq!(r.error, None, "{r:?}");
    assert_eq!(r.logs.len(), 3, "{r:?}");
    assert!(r.logs[0].starts_with("failed Error: jwtDecodeJwt: not a JWT"), "{r:?}");
    assert_eq!(r.logs[1], "failed TypeError: cannot read property 'x' of null");
    assert_eq!(r.logs[2], "failed HookError: no [env.WEBHOOK_SECRET]");
}

/// `console.info`, `warn`, `error` and `debug` write a line each, as `console.log` does, in the
/// order called: a script that reaches for one (`console.error` in a catch) runs on, where a
/// missing method would throw and fail an `oob.start` hook closed.
#[tokio::test]
async fn the_consoles_other_levels_write_as_log_does() {
    let r = run("function handler() { for (const level of ['log', 'info', 'warn', 'error', 'debug']) \
                 console[level](level, {n: 1}, 2n); return 1; }")
    .await;
    assert_eq!(r.error, None, "{r:?}");
    let levels = ["log", "info", "warn", "error", "debug"];
    assert_eq!(r.logs, levels.map(|level| format!(r#"{level} {{"n":1}} 2n"#)));
}

/// No env value leaves the sandbox through what a hook asks for: a deny reason and a transaction
/// text (which reach a 403, an event, a log line and the phone) are scrubbed as logs are.
#[tokio::test]
async fn env_values_do_not_leave_through_deny_or_the_transaction_text() {
    let r = run("function handler(e, api) { api.setTransactionText('key ' + env.WEBHOOK_SECRET); \
                 api.deny('blocked: ' + env.WEBHOOK_SECRET); return null; }")
    .await;
    assert_eq!(r.error, None, "{r:?}");
    assert_eq!(r.actions.denied.as_deref(), Some("blocked: [env.WEBHOOK_SECRET]"));
    assert_eq!(r.actions.transaction_text.as_deref(), Some("key [env.WEBHOOK_SECRET]"));
}

/// A run signs at most `MAX_SIGNATURES_PER_RUN` tokens; the next call throws, saying so, and a
/// script that catches it keeps the tokens it has.
#[tokio::test]
async fn a_run_signs_a_bounded_number_of_tokens() {
    let r = sandbox::run(
        keys(),
        job("function handler(e) { let n = 0; try { for (;;) { jwtCreateSignedJwt({sub: 'x'}); n++; } } catch (err) { return [n, String(err.message)]; } }", 5_000),
    )
    .await;
    assert_eq!(r.error, None, "{r:?}");
    assert_eq!(r.result[0], sandbox::MAX_SIGNATURES_PER_RUN);
    assert_eq!(
        r.result[1],
        format!("jwtCreateSignedJwt: at most {} tokens a run", sandbox::MAX_SIGNATURES_PER_RUN)
    );
}

/// A token minted in the sandbox verifies, with an independent library (`p256` ECDSA over the
/// JWS signing input, not `jsonwebtoken`), against the JWKS we publish; and with our own helper.
#[tokio::test]
async fn a_minted_token_verifies_against_our_jwks() {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine as _;
    use p256::ecdsa::signature::Verifier;
    let keys = keys();
    let r = sandbox::run(
        keys.clone(),
        job("function handler(e) { return jwtCreateSignedJwt({sub: e.namedUser, iss: 'forged'}, {audience: 'downstream', expiresInSecs: 60}); }", 1_000),
    )
    .await;
    assert_eq!(r.error, None, "{r:?}");
    let token = r.result.as_str().unwrap();
    let jwks = json!({"keys": [helpers::jwk(&keys.key.verifying_key().into(), &keys.kid)]});
    // Independent check: the JWK's x and y as a P-256 point, the signature as r || s.
    let jwk = &jwks["keys"][0];
    let coordinate = |c: &str| URL_SAFE_NO_PAD.decode(jwk[c].as_str().unwrap()).unwrap();
    let mut sec1 = vec![4u8];
    sec1.extend(coordinate("x"));
    sec1.extend(coordinate("y"));
    let key = p256::ecdsa::VerifyingKey::from_sec1_bytes(&sec1).unwrap();
    let (input, signature) = token.rsplit_once('.').unwrap();
    let signature = p256::ecdsa::Signature::from_slice(&URL_SAFE_NO_PAD.decode(signature).unwrap()).unwrap();
    key.verify(input.as_bytes(), &signature).expect("the signature verifies independently");
    let payload: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(input.split('.').nth(1).unwrap()).unwrap()).unwrap();
    assert_eq!(payload["iss"], "https://rp.example.com/rp/api/apps/demo", "iss cannot be forged");
    assert_eq!(
        (payload["sub"].as_str(), payload["aud"][0].as_str()),
        (Some("alice@example.com"), Some("downstream"))
    );
    // And through the sandbox's own helper, with the JWKS passed in.
    let mut verify = job(
        "function handler(e) { return jwtDecodeVerify(e.token, {jwks: e.jwks, issuer: 'https://rp.example.com/rp/api/apps/demo', audience: 'downstream'}).payload.sub; }",
        1_000,
    );
    verify.event = json!({"token": token, "jwks": jwks});
    let r = sandbox::run(keys, verify).await;
    assert_eq!((r.result.as_str(), r.error), (Some("alice@example.com"), None));
}

/// Every hostile script ends with a clear error (or is harmless), within its limit plus the
/// backstop, and the run after it is unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_scripts_are_contained() {
    let hostile: &[(&str, &str, &str)] = &[
        ("infinite loop", "function handler() { while (true) {} }", "timed out"),
        (
            "loop that catches its own out-of-memory errors",
            "function handler() { let a = []; while (true) { try { a.push('x'.repeat(1 << 20)); } catch (e) { a = []; } } }",
            "timed out",
        ),
        ("deep recursion", "function f(n) { return f(n + 1) + 1; } function handler() { return f(0); }", "stack"),
        ("huge string", "function handler() { let s = 'x'; while (true) s += s; }", "string too long"),
        ("allocating 200 MiB", "function handler() { const a = []; for (let i = 0; i < 200; i++) a.push('x'.repeat(1 << 20) + i); return a.length; }", "memory limit"),
        ("huge array", "function handler() { const a = []; for (;;) a.push({k: a.length}); }", "timed out|memory"),
        ("prototype pollution of a helper", "function handler() { sha256 = () => 'owned'; return sha256('abc'); }", "read-only"),
        ("redefining a helper", "function handler() { Object.defineProperty(globalThis, 'jwtVerify', {value: () => true}); }", "TypeError"),
        ("Object.prototype pollution", "function handler() { Object.prototype.polluted = 1; return {}.polluted; }", "=1"),
        ("mutating env", "'use strict'; function handler() { env.RISK_ISSUER = 'evil'; }", "TypeError"),
        ("adding to env", "'use strict'; function handler() { env.NEW = 'x'; }", "TypeError"),
        ("reaching for require", "function handler() { return require('fs'); }", "ReferenceError"),
        ("reaching for process", "function handler() { return process.env; }", "ReferenceError"),
        ("reaching for fetch", "function handler() { return fetch('http://169.254.169.254/'); }", "ReferenceError"),
        ("timers", "function handler() { setTimeout(() => {}, 10); }", "ReferenceError"),
        ("import()", "async function handler() { return await import('os'); }", "Error"),
        ("host objects on globalThis", "function handler() { return Object.getOwnPropertyNames(globalThis).filter(n => /^(std|os|Deno|Bun|require|process)$/.test(n)); }", "=[]"),
        ("eval", "function handler() { return eval('1 + 1'); }", "=2"),
        ("Function constructor", "function handler() { return typeof Function('return this')().sha256; }", "=\"function\""),
        ("huge console.log flood", "function handler() { for (let i = 0; i < 100000; i++) console.log('x'.repeat(10000)); return 'done'; }", "timed out|dropped"),
        ("throwing a non-Error", "function handler() { throw {secret: env.WEBHOOK_SECRET}; }", "non-Error"),
        ("printing a secret", "function handler() { console.log(env.WEBHOOK_SECRET); throw new Error('leak ' + env.WEBHOOK_SECRET); }", "[env.WEBHOOK_SECRET]"),
        ("a promise that never settles", "function handler() { return new Promise(() => {}); }", "never settled"),
        ("a rejected promise", "async function handler() { throw new RangeError('nope'); }", "RangeError: nope"),
        ("no handler", "const x = 1;", "must define a function handler"),
        ("syntax error", "function handler( {", "SyntaxError"),
        ("a result that is not JSON", "function handler() { const a = {}; a.self = a; return a; }", "TypeError"),
        ("a huge JWT", "function handler() { return jwtDecodeJwt('a'.repeat(500000)); }", "not a JWT"),
        // What a helper does runs in Rust, past the interrupt's reach: its inputs are bounded.
        ("a JWT past the helpers' bound", "function handler() { return jwtVerify('a'.repeat(2 << 20), {secret: 'k'}); }", "=false"),
        ("a token to decode past the bound", "function handler() { return jwtDecodeVerify('a'.repeat(2 << 20), {secret: 'k'}); }", "jwtDecodeVerify: at most 1048576 bytes"),
        ("options past the bound", "function handler() { return jwtVerify('a.b.c', {secret: 'k'.repeat(2 << 20)}); }", "jwtVerify options: at most 1048576 bytes"),
        ("a payload past the bound", "function handler() { return jwtCreateSignedJwt({x: 'k'.repeat(2 << 20)}); }", "jwtCreateSignedJwt payload: at most 1048576 bytes"),
        ("a helper fed garbage", "function handler() { return sha256({length: 1e12}); }", "must be a string or an array of bytes"),
        ("catastrophic regex backtracking", "function handler() { return /^(a+)+$/.test('a'.repeat(40) + 'b'); }", "timed out"),
        ("a microtask loop", "async function handler() { for (;;) await Promise.resolve(1); }", "timed out"),
        ("a result whose getter never returns", "function handler() { return {get x() { for (;;) {} }}; }", "timed out"),
        ("a thrown object whose toString never returns", "function handler() { throw {toString() { for (;;) {} }}; }", "non-Error"),
        // Written with a replacer, which JSON calls for each value it writes, and which asks the
        // deadline as it goes: a million references to one chain 400 deep.
        ("logging a deep chain a million times over", "function handler() { let c = {}; for (let i = 0; i < 400; i++) c = {next: c}; const wide = new Array(1e6).fill(c); for (;;) console.log(wide); }", "timed out"),
        ("a logged error whose name never returns", "function handler() { const e = new Error('x'); Object.defineProperty(e, 'name', {get() { for (;;) {} }}); console.log(e); return 1; }", "timed out"),
        // Filled through the paced view, it meets the deadline or the memory limit first,
        // whichever the machine's pace brings first (it met the deadline 3 runs in 5 at 5 s).
        ("a 4-billion-element array", "function handler() { return new Array(2 ** 32 - 1).fill(0).length; }", "timed out|memory limit"),
        ("a result past the memory limit", "function handler() { return 'z'.repeat(50 << 20); }", "memory limit"),
        // A wait blocks the thread in C, where no interrupt reaches it: the runtime may not block.
        ("Atomics.wait with no time-out", "function handler() { return Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); }", "TypeError: cannot block in this thread"),
        // One operation in C that allocates nothing as it goes: writing out a BigInt of a million
        // bits took 4.4 s here (debug), so the watchdog answers and the thread is abandoned.
        ("a million-bit BigInt written in decimal", "function handler() { return String(2n ** 1000000n - 1n).length; }", "timed out"),
        // A proxy's traps recurse in C, one native frame a proxy: the run's stack limit holds
        // them, short of its thread's own stack.
        ("a chain of 100,000 proxies", "function handler() { let p = {}; for (let i = 0; i < 1e5; i++) p = new Proxy(p, {}); return p.x; }", "Maximum call stack size exceeded"),
        // The prelude is a module a script can import by name; a second call changes nothing
        // (the methods are not wrapped again), and its array methods stay paced.
        ("importing the prelude to run it again", "async function handler() { const m = await import('rp:prelude'); const join = [].join; m.default(1e12); if ([].join !== join) return 'wrapped again'; return new Array(2 ** 32 - 1).join('').length; }", "timed out"),
    ];
    let keys = keys();
    let mut faults = Vec::new();
    for (name, source, expected) in hostile {
        // A script meant to run out of time gets 200 ms; the others 5 s, so that a busy machine
        // does not turn the error they are meant to meet into a time-out.
        let limit = Duration::from_millis(if expected.contains("timed out") { 200 } else { 5_000 });
        let started = Instant::now();
        let r = sandbox::run(keys.clone(), job(source, limit.as_millis() as u64)).await;
        let took = started.elapsed();
        assert!(took < limit + sandbox::BACKSTOP + Duration::from_millis(300), "{name}: took {took:?}");
        let text = format!("{:?} {}", r.error, r.logs.join("\n"));
        println!(
            "{name}: {:?} {:?} logs={} {took:?}",
            r.error,
            r.result.to_string().chars().take(80).collect::<String>(),
            r.logs.len()
        );
        let met = match expected.strip_prefix('=') {
            Some(json) => r.error.is_none() && r.result == serde_json::from_str::<Value>(json).unwrap(),
            None => expected.split('|').any(|e| text.contains(e)),
        };
        if !met {
            faults.push(format!("{name}: expected '{expected}' in {:?} / {:?}", r.error, r.result));
        }
        assert!(!text.contains("whsec_0123456789abcdef"), "{name}: a secret leaked: {text}");
        assert!(r.logs.len() <= sandbox::MAX_LOG_LINES + 1, "{name}: logs are bounded");
        // The next run starts clean: helpers intact, nothing polluted.
        let after = run("function handler() { return [sha256('abc').slice(0, 6), ({}).polluted === undefined, typeof env.RISK_ISSUER]; }").await;
        assert_eq!(
            after.result,
            json!(["ba7816", true, "string"]),
            "{name}: the next run is affected: {after:?}"
        );
    }
    assert!(faults.is_empty(), "{faults:#?}");
    println!("hostile scripts contained: {}", hostile.len());
    assert!(hostile.len() >= 20);
}

/// A signer whose key takes `delay` to fetch: a run that signs is stuck in a host call, where
/// no interrupt reaches it, for that long.
struct SlowSigning {
    inner: Arc<OneKey>,
    delay: Duration,
}

#[async_trait::async_trait]
impl JwtSigner for SlowSigning {
    async fn signing_key(&self) -> Result<(String, p256::ecdsa::SigningKey), String> {
        tokio::time::sleep(self.delay).await;
        self.inner.signing_key().await
    }
}

fn tenant_job(tenant: &str, source: &str, timeout_ms: u64) -> Job {
    Job { tenant: tenant.into(), ..job(source, timeout_ms) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_tenants_overrunning_runs_make_only_that_tenant_wait_or_fail() {
    let slow: Arc<dyn JwtSigner> = Arc::new(SlowSigning { inner: keys(), delay: Duration::from_secs(3) });
    let stuck = "function handler() { return jwtCreateSignedJwt({sub: 'x'}); }";
    // Six runs of the hostile tenant at once, each stuck 3 s where no interrupt reaches it,
    // with a 100 ms limit: they are answered, abandoned, or refused, never left waiting.
    let hostile: Vec<_> =
        (0..6).map(|_| tokio::spawn(sandbox::run(slow.clone(), tenant_job("hostile", stuck, 100)))).collect();
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    // The other tenant runs as if alone, before and after the hostile runs are abandoned.
    let keys = keys();
    for i in 0..20 {
        let started = Instant::now();
        let r = sandbox::run(
            keys.clone(),
            tenant_job("quiet", "function handler() { return sha256('abc'); }", 1_000),
        )
        .await;
        assert_eq!(r.error, None, "run {i} of the quiet tenant: {r:?}");
        assert!(started.elapsed() < Duration::from_millis(800), "run {i} waited {:?}", started.elapsed());
    }
    for run in hostile {
        let r = run.await.unwrap();
        let error = r.error.unwrap_or_default();
        assert!(
            ["timed out after 100 ms", "overran its limits", "busy with this tenant's other runs"]
                .iter()
                .any(|e| error.contains(e)),
            "{error}"
        );
    }
    // While its abandoned run still runs, the hostile tenant is refused at once...
    let r =
        sandbox::run(keys.clone(), tenant_job("hostile", "function handler() { return 1; }", 1_000)).await;
    assert!(r.error.as_deref().unwrap_or_default().contains("overran its limits"), "{r:?}");
    // ...and once it has ended, that tenant runs again.
    let mut recovered = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let r = sandbox::run(keys.clone(), tenant_job("hostile", "function handler() { return 1; }", 1_000))
            .await;
        if r.error.is_none() {
            recovered = true;
            break;
        }
    }
    assert!(recovered, "the hostile tenant runs again once its abandoned run ended");
}

/// The deadline's interrupt ends a run also where it lands in the script's own code that a host
/// function called (a getter or `toJSON` of what is logged or handed a helper): the host passes
/// it on, so the run's thread ends and the tenant runs again, where a swallowed interrupt left
/// the thread running for ever and the tenant refused as still overrunning. A promise's
/// reactions, which the host runs job by job, end at the deadline too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_inside_a_host_call_still_ends_the_run() {
    let scripts = [
        "function handler() { const o = {toJSON() { for (;;) {} }}; for (;;) console.log(o); }",
        "function handler() { const e = new Error('x'); Object.defineProperty(e, 'name', {get() { for (;;) {} }}); for (;;) console.log(e); }",
        "function handler() { const e = new Error(); e.message = {toString() { for (;;) {} }}; for (;;) console.log(e); }",
        "function handler() { for (;;) { try { sha256({get length() { for (;;) {} }}); } catch (e) {} } }",
        "async function handler() { for (;;) { await Promise.resolve().then(() => { for (;;) {} }).catch(() => {}); } }",
        "async function handler() { for (;;) { await Promise.resolve().then(() => console.log({toJSON() { for (;;) {} }})).catch(() => {}); } }",
    ];
    let keys = keys();
    for (i, source) in scripts.iter().enumerate() {
        let tenant = format!("interrupted-{i}");
        let r = sandbox::run(keys.clone(), tenant_job(&tenant, source, 100)).await;
        assert_eq!(r.error.as_deref(), Some("timed out after 100 ms"), "{source}: {r:?}");
        // The thread ends at the deadline, not abandoned past the backstop: a tenant whose run
        // still runs is refused; give a busy machine a few seconds to show the end.
        let mut ran = None;
        for _ in 0..25 {
            let next =
                sandbox::run(keys.clone(), tenant_job(&tenant, "function handler() { return 1; }", 1_000))
                    .await;
            if next.error.is_none() {
                ran = Some(next.result);
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(ran, Some(json!(1)), "{source}: the run's thread never ended");
    }
}

/// Memory filled with small values runs out where QuickJS cannot even build its out-of-memory
/// error, and throws `null` instead, or builds it without room for its message (`Invalid error
/// message`): the run is still told it met its memory limit. A script's own `null` is not taken
/// for it, and a run that meets the limit, lets go and goes on ends well.
#[tokio::test]
async fn running_out_of_memory_is_told_as_such_whatever_fills_it() {
    let filling = [
        ("nested objects", "function handler() { let o = {}, c = o; for (;;) { c.a = {}; c = c.a; } }"),
        ("small arrays", "function handler() { const a = []; for (;;) a.push([1, 2, 3]); }"),
        ("short strings", "function handler() { const a = []; for (;;) a.push('s' + a.length); }"),
        ("a map", "function handler() { const m = new Map(); for (let i = 0; ; i++) m.set(i, i); }"),
        ("objects", "function handler() { const a = []; for (;;) a.push({k: a.length}); }"),
        ("closures", "function handler() { const a = []; for (let i = 0; ; i++) a.push(() => i); }"),
        (
            "megabyte strings",
            "function handler() { const a = []; for (;;) a.push('x'.repeat(1 << 20) + a.length); }",
        ),
        ("one growing array", "function handler() { const a = []; for (;;) a.push(0); }"),
        (
            "keys, at the top level, leaving no room for the error's message",
            "const a = []; for (let i = 0; i < 2e6; i++) a.push('k' + ((i * 7919) % 2e6)); function handler() { return 1; }",
        ),
        (
            "a normalized string, whose engine sets no error for it",
            "function handler() { return '\\u1e9b\\u0323'.repeat(4e5).normalize('NFKD').length; }",
        ),
    ];
    for (name, source) in filling {
        let job = Job { memory_bytes: 8 * 1024 * 1024, ..job(source, 10_000) };
        let r = sandbox::run(keys(), job).await;
        assert_eq!(r.error.as_deref(), Some("the run exceeded its memory limit"), "{name}");
    }
    let r = run("function handler() { throw null; }").await;
    assert_eq!(r.error.as_deref(), Some("a non-Error value was thrown: null"));
    let recovering = "function handler() { let a = []; try { for (;;) a.push([1, 2, 3]); } catch (e) { a = null; } return 'recovered'; }";
    let r = sandbox::run(keys(), Job { memory_bytes: 8 * 1024 * 1024, ..job(recovering, 10_000) }).await;
    assert_eq!((r.result, r.error), (json!("recovered"), None));
    // What is let go is counted out: ten times the limit, a megabyte at a time, and an array
    // grown to a megabyte, eight times over.
    let churning = "function handler() { let n = 0; for (let i = 0; i < 80; i++) n += ('x'.repeat(1 << 20) + i).length; \
                    for (let i = 0; i < 8; i++) { const a = []; while (a.length < (1 << 16)) a.push(i); n += a.length; } return n; }";
    let r = sandbox::run(keys(), Job { memory_bytes: 8 * 1024 * 1024, ..job(churning, 10_000) }).await;
    assert_eq!((r.result, r.error), (json!(80 * (1 << 20) + 10 + 2 * 70 + 8 * (1 << 16)), None));
}

#[tokio::test]
async fn a_loop_catching_its_own_out_of_memory_errors_stops_at_its_deadline() {
    // Before large allocations failed past the deadline, this ran 25 s past a 1 ms limit and
    // was answered only by the watchdog, a second late.
    let source = "function handler() { let a = []; while (true) { try { a.push('x'.repeat(1 << 20)); } catch (e) { a = []; } } }";
    for timeout_ms in [1, 50, 200] {
        let started = Instant::now();
        let r = sandbox::run(keys(), tenant_job("oom", source, timeout_ms)).await;
        let took = started.elapsed();
        assert_eq!(r.error.as_deref(), Some(format!("timed out after {timeout_ms} ms").as_str()));
        // The watchdog answers no earlier than the deadline plus its backstop: an answer before
        // that is the run's own, however busy the machine is.
        assert!(
            took < Duration::from_millis(timeout_ms) + sandbox::BACKSTOP,
            "{timeout_ms} ms: the run itself stopped, not the watchdog: {took:?}"
        );
    }
}

/// One operation in C can carry a run past its deadline with no interrupt asked on the way (a
/// long BigInt parsed). A run that ends past its deadline is a time-out whatever it
/// returned: its limit does not depend on where in the script the time went.
#[tokio::test]
async fn a_run_that_ends_past_its_deadline_is_a_time_out() {
    let source = "function handler(event, api) { api.deny('late'); return BigInt('9'.repeat(150000)) > 0n; }";
    let whole = sandbox::run(keys(), job(source, 20_000)).await;
    assert_eq!((whole.error, whole.result), (None, json!(true)), "with time enough, it answers");
    // Half its own duration: the one operation starts before the deadline and ends after it,
    // well inside the backstop, so the run's thread ends it, not the watchdog.
    let timeout_ms = (whole.duration_ms / 2).max(1);
    let late = sandbox::run(keys(), job(source, timeout_ms)).await;
    assert_eq!(late.error, Some(format!("timed out after {timeout_ms} ms")), "{late:?}");
    assert_eq!(late.result, json!(null));
    assert!(late.duration_ms >= timeout_ms, "{late:?}");
}

/// Array methods loop in C over `length`, which holes or an array-like set as high as they like
/// while allocating nothing. Each such run ends at its own deadline, not the watchdog's: its
/// thread stops with it, so the tenant's next run is not refused as overrunning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn array_methods_over_holes_stop_at_the_deadline() {
    let looping = [
        ("join", "new Array(2 ** 32 - 1).join('')"),
        ("forEach", "new Array(2 ** 32 - 1).forEach(() => {})"),
        ("reverse", "new Array(2 ** 32 - 1).reverse().length"),
        ("indexOf on an array-like", "Array.prototype.indexOf.call({length: 2 ** 53 - 1}, 1)"),
        ("lastIndexOf on an array-like", "Array.prototype.lastIndexOf.call({length: 2 ** 53 - 1}, 1)"),
        ("splice on an array-like", "Array.prototype.splice.call({length: 2 ** 53 - 2}, 0, 1).length"),
        (
            "concat of a spreadable array-like",
            "[].concat({length: 2 ** 53 - 2, [Symbol.isConcatSpreadable]: true}).length",
        ),
        ("a Set of holes", "new Set(new Array(2 ** 32 - 1)).size"),
    ];
    for (name, expression) in looping {
        ends_at_its_deadline(name, &format!("function handler() {{ return {expression}; }}"), 200).await;
    }
}

/// Runs `source` as a tenant of its own: it ends at its own deadline, not the watchdog's, so
/// its thread stops with it and the tenant's next run is not refused as overrunning.
async fn ends_at_its_deadline(name: &str, source: &str, timeout_ms: u64) {
    let keys = keys();
    let tenant = format!("deadline-{name}");
    let r = sandbox::run(keys.clone(), tenant_job(&tenant, source, timeout_ms)).await;
    assert_eq!(r.error, Some(format!("timed out after {timeout_ms} ms")), "{name}: {r:?}");
    let next = sandbox::run(keys, tenant_job(&tenant, "function handler() { return 1; }", 1_000)).await;
    assert_eq!((next.error, next.result), (None, json!(1)), "{name}: its thread outlived the run");
}

/// QuickJS searches a string for a string in C, comparing at each place the first character
/// matches: a long run of one letter searched for half of it and another letter is one
/// operation of hours. Each such search, whichever method makes it and however its argument
/// becomes a string, ends at the run's own deadline, so the tenant's next run is not refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn string_searches_stop_at_the_deadline() {
    let searching = [
        ("indexOf", "s.indexOf(t)"),
        ("lastIndexOf", "s.lastIndexOf(t)"),
        ("includes", "s.includes(t)"),
        ("split", "s.split(t).length"),
        ("replace", "s.replace(t, 'x').length"),
        ("replaceAll", "s.replaceAll(t, 'x').length"),
        ("a search that becomes a string", "s.indexOf({toString: () => t})"),
        ("called on an object", "String.prototype.includes.call({toString: () => s}, t)"),
    ];
    for (name, expression) in searching {
        let source = format!(
            "function handler() {{ const s = 'a'.repeat(1e7), t = 'a'.repeat(5e5) + 'b'; return {expression}; }}"
        );
        ends_at_its_deadline(name, &source, 300).await;
    }
    // Searches paced as these are answer as before: in a long text, and where the first
    // character matches everywhere.
    let methods = "[s.indexOf(t), s.lastIndexOf(t), s.includes(t), s.split(t).length, s.replace(t, '').length, s.replaceAll(t, '!').length]";
    let found = [
        ("'lorem ipsum dolor sit amet, '.repeat(1e4) + 'the end'", "'sit amet, the end'", 279_990),
        ("'a'.repeat(5e4) + 'b'", "'a'.repeat(100) + 'b'", 49_900),
    ];
    for (s, t, at) in found {
        let source = format!("function handler() {{ const s = {s}, t = {t}; return {methods}; }}");
        let started = Instant::now();
        let r = sandbox::run(keys(), job(&source, 15_000)).await;
        println!("{s}: {:?}", started.elapsed());
        // The match is the string's end: what is left of it after a replace is what came before.
        assert_eq!((r.error, r.result), (None, json!([at, at, true, 2, at, at + 1])), "{s}");
    }
}

/// The paced methods answer as the native ones do: on array-likes, on strings, and on an array
/// longer than the run's memory could hold densely.
#[tokio::test]
async fn paced_array_methods_answer_as_before() {
    let source = "function handler() {
        const like = {length: 4, 0: 'a', 2: 'c', 3: 'd'};
        const sparse = new Array(300000); sparse[5] = 1; sparse[299999] = 2;
        const reversed = Array.prototype.reverse.call({length: 2, 0: 'x', 1: 'y'});
        let keys = 0, last;
        for (const _ of sparse.keys()) keys++;
        for (const entry of sparse.entries()) last = entry;
        return [
            Array.prototype.join.call(like, '-'),
            Array.prototype.slice.call('abc'),
            Array.prototype.indexOf.call(like, 'c'),
            [sparse.indexOf(1), sparse.lastIndexOf(2), sparse.includes(2), sparse.join('').length],
            keys, last, new Set(sparse).size,
            [reversed[0], reversed[1]],
            sparse.fill(0, 0, 2) === sparse, sparse.slice(0, 2),
            [].concat([1], {length: 1, 0: 2, [Symbol.isConcatSpreadable]: true}),
            [3, 1, 2].sort(), [1, 2, 3].map((x) => x * 2),
            [Array.prototype.join.name, Array.prototype.join.length, Array.prototype.splice.length],
            Array.prototype[Symbol.iterator] === Array.prototype.values,
            Object.getOwnPropertyDescriptor(Array.prototype, 'map'),
        ];
    }";
    // 4 MiB of memory: the 300,000-element array is past what it could hold densely.
    let job = Job { memory_bytes: 4 * 1024 * 1024, ..job(source, 15_000) };
    let r = sandbox::run(keys(), job).await;
    assert_eq!(r.error, None, "{r:?}");
    assert_eq!(
        r.result,
        json!([
            "a--c-d",
            ["a", "b", "c"],
            2,
            [5, 299999, true, 2],
            300000,
            [299999, 2],
            3,
            ["y", "x"],
            true,
            [0, 0],
            [1, 2],
            [1, 2, 3],
            [2, 4, 6],
            ["join", 1, 2],
            true,
            {"writable": true, "enumerable": false, "configurable": true}
        ])
    );
}
