//! `rp-device`: a demo phone for trying the API by hand (the README's walkthrough). It registers
//! with a registration link's code, keeps its keys and device token in a file readable only by
//! its owner, and answers the out-of-band requests sent to it with a signed decision.

use anyhow::{bail, Context};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use clap::{Parser, Subcommand};
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};
use p256::elliptic_curve::sec1::ToEncodedPoint;
use rp_shared::domain::oob::{answer_message, Decision, Extras, Nonces};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::{Path, PathBuf};

#[derive(Parser)]
#[command(
    name = "rp-device",
    about = "A demo phone: registers, then approves or declines out-of-band logins"
)]
struct Cli {
    #[command(flatten)]
    api: rp_shared::agent::ApiAddress,
    /// Where the device keeps its keys and token (created by `register`, mode 0600).
    #[arg(long, env = "RP_DEVICE_STATE", default_value = ".device.json")]
    state: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Register with the code of a registration link (`/cc/api/apps/{appId}/users/{user}/registration-links`).
    Register {
        /// The link's code. A code may start with `-` (base64url): it is still the value.
        #[arg(long, allow_hyphen_values = true)]
        code: String,
        /// The name the device shows as.
        #[arg(long, default_value = "Demo phone")]
        name: String,
    },
    /// Answer every pending out-of-band request: approve (the default) or decline.
    Approve {
        #[arg(long)]
        decline: bool,
        /// The code the service showed, for a request that asks for number matching.
        #[arg(long)]
        amount: Option<String>,
    },
}

/// What the device keeps between runs.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeviceState {
    device_id: String,
    device_token: String,
    /// The signing key's scalar, hex.
    signing_key: String,
    /// The key-agreement key's scalar, hex (what opens the login-certificate envelope).
    agreement_key: String,
}

/// A pending request, with the fields the answer is signed over.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Pending {
    request_id: String,
    machine: Option<String>,
    transaction_text: Option<String>,
    extras: Option<Extras>,
    #[serde(flatten)]
    nonces: Nonces,
}

#[derive(Deserialize)]
struct PendingList {
    requests: Vec<Pending>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let http = reqwest::Client::builder().timeout(std::time::Duration::from_secs(30)).build()?;
    let base = cli.api.base_url.trim_end_matches('/');
    match cli.command {
        Command::Register { code, name } => register(&http, base, &cli.state, &code, &name).await,
        Command::Approve { decline, amount } => {
            let decision = if decline { Decision::Decline } else { Decision::Approve };
            answer_all(&http, base, &load(&cli.state)?, decision, amount.as_deref()).await
        }
    }
}

fn public_b64(key: &p256::SecretKey) -> String {
    STANDARD.encode(key.public_key().to_encoded_point(false).as_bytes())
}

async fn register(
    http: &reqwest::Client,
    base: &str,
    path: &Path,
    code: &str,
    name: &str,
) -> anyhow::Result<()> {
    if path.exists() {
        bail!("{} already holds a device; remove it or pass --state to register another", path.display());
    }
    let signing = p256::SecretKey::random(&mut rand::rngs::OsRng);
    let agreement = p256::SecretKey::random(&mut rand::rngs::OsRng);
    let device_id = format!("demo-{}", uuid::Uuid::new_v4().simple());
    let body = json!({
        "code": code, "deviceId": device_id, "friendlyName": name, "modelNumber": "rp-device",
        "signingPublicKey": public_b64(&signing), "keyAgreementPublicKey": public_b64(&agreement),
    });
    let answer = http.post(format!("{base}/rp/versioned/device/registrations")).json(&body).send().await?;
    let status = answer.status();
    let answer: serde_json::Value = answer.json().await.context("the registration answer")?;
    if !status.is_success() {
        bail!("registration refused ({status}): {answer}");
    }
    let device_token =
        answer["deviceToken"].as_str().context("the registration answer has no deviceToken")?.to_owned();
    let state = DeviceState {
        device_id: device_id.clone(),
        device_token,
        signing_key: hex::encode(signing.to_bytes()),
        agreement_key: hex::encode(agreement.to_bytes()),
    };
    save(path, &state)?;
    println!("registered device {device_id} (keys and token in {})", path.display());
    Ok(())
}

async fn answer_all(
    http: &reqwest::Client,
    base: &str,
    state: &DeviceState,
    decision: Decision,
    amount: Option<&str>,
) -> anyhow::Result<()> {
    let key = SigningKey::from_slice(&hex::decode(&state.signing_key)?).context("the stored signing key")?;
    let pending = http
        .get(format!("{base}/rp/versioned/device/oob/requests"))
        .bearer_auth(&state.device_token)
        .send()
        .await?
        .error_for_status()?
        .json::<PendingList>()
        .await?;
    if pending.requests.is_empty() {
        println!("no pending requests");
    }
    for request in pending.requests {
        let shown = request.extras.as_ref().and_then(|e| e.amount.as_deref());
        let message =
            answer_message(&request.request_id, &request.nonces, request.transaction_text.as_deref(), shown);
        let signature: Signature = key.sign(&message.signed(decision, amount));
        let mut body =
            json!({"decision": decision, "signature": STANDARD.encode(signature.to_der().as_bytes())});
        if let Some(amount) = amount {
            body["amount"] = json!(amount);
        }
        let answer = http
            .post(format!("{base}/rp/versioned/device/oob/requests/{}", request.request_id))
            .bearer_auth(&state.device_token)
            .json(&body)
            .send()
            .await?;
        let status = answer.status();
        let text = request.transaction_text.as_deref().unwrap_or("(no text)");
        let machine = request.machine.as_deref().unwrap_or("-");
        println!(
            "{} {} on {machine}: \"{text}\": {status} {}",
            decision.as_str(),
            request.request_id,
            answer.text().await?
        );
    }
    Ok(())
}

fn load(path: &Path) -> anyhow::Result<DeviceState> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading {} (run `rp-device register` first)", path.display()))?;
    Ok(serde_json::from_str(&text)?)
}

/// Writes the state readable by its owner only: it holds the device's private keys and token.
fn save(path: &Path, state: &DeviceState) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).with_context(|| format!("creating {}", path.display()))?;
    file.write_all(serde_json::to_string_pretty(state)?.as_bytes())?;
    Ok(())
}
