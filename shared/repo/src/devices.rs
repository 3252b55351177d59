//! Registration links, users and their devices. Layout:
//!
//! | pk | sk | item |
//! |---|---|---|
//! | `REGLINK#<sha256 of code>` | `LINK` | a one-time link; TTL a day after it expires |
//! | `USER#<app>#<namedUser>` | `USER` | the user |
//! | `USER#<app>#<namedUser>` | `DEVICE#<deviceId>` | one of the user's devices |
//! | `DEVICEID#<app>#<deviceId>` | `DEVICE` | which user a device id belongs to (keeps ids unique per app) |
//! | `ALIAS#<app>#<folded name>` | `ALIAS` | a workstation user name (`CORP\alice`) standing for a user |
//! | `DEVTOKEN` | `<tokenId>` | a device token (hash only) |
//! | `PUSHEP#<endpoint ARN>` | `<app>#<deviceId>` | a device holding that push endpoint |
//!
//! A registration writes the used link, the device, its id guard, its token and the user in one
//! transaction conditional on the link's version: of two racing registrations one wins.

use rp_domain::apps::AppId;
use rp_domain::devices::{
    folded_name, DeviceRecord, DeviceTokenRecord, LinkRecord, RegistrationError, TokenTrade, UserRecord,
};
use rp_domain::push::PushRegistration;
use rp_domain::time::EpochMillis;
use rp_domain::tokens::TokenHash;
use rp_ports::{retry_on_conflict, Condition, Item, ItemKey, ItemStore, Query, SortKey, StoreError, WriteOp};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Pointer {
    named_user: String,
}

fn link_key(digest: &str) -> ItemKey {
    ItemKey::new(format!("REGLINK#{digest}"), "LINK")
}

fn user_pk(app: &AppId, user: &str) -> String {
    format!("USER#{app}#{user}")
}

fn device_guard(app: &AppId, device_id: &str) -> ItemKey {
    ItemKey::new(format!("DEVICEID#{app}#{device_id}"), "DEVICE")
}

/// When `device`'s token stops working, if its record was written before that was kept: from
/// `token`, and a token that is gone ended.
fn learn_token_end(device: &mut DeviceRecord, token: Option<&DeviceTokenRecord>) {
    if device.token_ends_at.is_none() {
        device.token_ends_at = Some(token.map_or(EpochMillis(0), DeviceTokenRecord::expiry));
    }
}

/// Where a device's record is filed: under its user.
fn device_key(app: &AppId, named_user: &str, device_id: &str) -> ItemKey {
    ItemKey::new(user_pk(app, named_user), format!("DEVICE#{device_id}"))
}

/// A device token's record, under the id its hash gives it.
fn token_key(token_id: &str) -> ItemKey {
    ItemKey::new("DEVTOKEN", token_id)
}

/// The deletion of the token `device` traded last, if it has one: it may trade no more.
fn superseded_token_goes(device: &DeviceRecord) -> Option<WriteOp> {
    let id = device.superseded_token_id.as_deref()?;
    Some(WriteOp::Delete { key: token_key(id), condition: Condition::Any })
}

/// The writes that trade `device`'s token (at `version`, not frozen) for `new` as `trade` says.
fn trade_ops(
    device: &DeviceRecord,
    version: u64,
    trade: &TokenTrade,
    new: &DeviceTokenRecord,
) -> Result<Vec<WriteOp>, StoreError> {
    let record = device_key(&device.app_id, &device.named_user, &device.device_id);
    let updated = device.clone().traded(trade, new);
    let mut ops = vec![
        WriteOp::Put { item: Item::new(token_key(&new.token_id), new)?, condition: Condition::Absent },
        WriteOp::Put { item: Item::new(record, &updated)?, condition: Condition::Version(version) },
        Devices::unfrozen(&device.app_id, &device.device_id),
    ];
    match trade {
        TokenTrade::Supersede(old) => {
            let old = Item::new(token_key(&old.token_id), old)?;
            ops.push(WriteOp::Put { item: old, condition: Condition::Exists });
            ops.extend(superseded_token_goes(device));
        }
        TokenTrade::Replace => {
            ops.push(WriteOp::Delete { key: token_key(&device.token_id), condition: Condition::Exists });
        }
    }
    Ok(ops)
}

/// Written when a device is removed or its token ended, before either: from then on no token
/// swap of the device can commit (each checks this is absent), nor anything else that must not
/// outlive the device ([`Devices::unfrozen`]), so the removal or the end reads a device that can
/// no longer move and always wins, however fast the device rotates.
fn frozen_key(app: &AppId, device_id: &str) -> ItemKey {
    ItemKey::new(format!("DEVFROZEN#{app}#{device_id}"), "FROZEN")
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Frozen {
    frozen: bool,
}

fn frozen_item(app: &AppId, device_id: &str) -> Result<Item, StoreError> {
    Item::new(frozen_key(app, device_id), &Frozen { frozen: true })
}

/// The partition of the devices holding the push endpoint `endpoint`: one phone's token, and so
/// one endpoint of a platform application, stands for each device record made on that phone
/// (in one app, or in several apps naming the same platform application).
fn holders_pk(endpoint: &str) -> String {
    format!("PUSHEP#{endpoint}")
}

fn holder_key(endpoint: &str, app: &AppId, device_id: &str) -> ItemKey {
    ItemKey::new(holders_pk(endpoint), format!("{app}#{device_id}"))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Holder<'a> {
    app_id: &'a AppId,
    device_id: &'a str,
}

/// The write that ends `device`'s hold on the push endpoint it has, if it has one.
fn hold_ends(device: &DeviceRecord) -> Option<WriteOp> {
    let push = device.push.as_ref()?;
    let key = holder_key(&push.endpoint, &device.app_id, &device.device_id);
    Some(WriteOp::Delete { key, condition: Condition::Any })
}

fn alias_key(app: &AppId, alias: &str) -> ItemKey {
    ItemKey::new(format!("ALIAS#{app}#{}", folded_name(alias)), "ALIAS")
}

const LINK_KEPT_AFTER_EXPIRY_SECS: i64 = 24 * 3600;

#[derive(Clone, Copy)]
pub struct Devices<'a> {
    store: &'a dyn ItemStore,
}

impl<'a> Devices<'a> {
    pub fn new(store: &'a dyn ItemStore) -> Self {
        Self { store }
    }

    pub async fn create_link(&self, digest: &str, link: &LinkRecord) -> Result<(), StoreError> {
        let ttl = link.expires_at.plus_secs(LINK_KEPT_AFTER_EXPIRY_SECS).as_secs();
        self.store.put(Item::new(link_key(digest), link)?.with_ttl(Some(ttl)), Condition::Absent).await?;
        Ok(())
    }

    pub async fn link(&self, digest: &str) -> Result<Option<(LinkRecord, u64)>, StoreError> {
        super::get_versioned(self.store, &link_key(digest)).await
    }

    pub async fn user(&self, app: &AppId, named_user: &str) -> Result<Option<UserRecord>, StoreError> {
        let key = ItemKey::new(user_pk(app, named_user), "USER");
        self.store.get(&key).await?.map(|i| i.data()).transpose()
    }

    /// The user a name stands for: the registered name itself or one of its aliases.
    ///
    /// The user and the alias are read at once: a name given by its alias (the usual case for a
    /// workstation's `DOMAIN\user`) then waits for two reads, not three.
    pub async fn resolve_user(&self, app: &AppId, name: &str) -> Result<Option<UserRecord>, StoreError> {
        let resolved = self.resolve_with(app, name, |_| std::future::ready(Ok(()))).await?;
        Ok(resolved.map(|(user, ())| user))
    }

    /// The user `name` names ([`resolve_user`](Self::resolve_user)) with their devices, most
    /// recently registered last.
    pub async fn user_and_devices(
        &self,
        app: &AppId,
        name: &str,
    ) -> Result<Option<(UserRecord, Vec<DeviceRecord>)>, StoreError> {
        let devices = |named_user: String| async move { self.devices_of(app, &named_user).await };
        self.resolve_with(app, name, devices).await
    }

    /// The user `name` names, with `beside(the user's name)` read beside that user: first beside the
    /// name's own user and alias (as if `name` named a user), then, for an alias, beside the
    /// alias's user.
    async fn resolve_with<T, F>(
        &self,
        app: &AppId,
        name: &str,
        beside: impl Fn(String) -> F,
    ) -> Result<Option<(UserRecord, T)>, StoreError>
    where
        F: std::future::Future<Output = Result<T, StoreError>>,
    {
        let alias = alias_key(app, name);
        let (user, alias, extra) =
            tokio::join!(self.user(app, name), self.store.get(&alias), beside(name.to_owned()));
        if let Some(user) = user? {
            return Ok(Some((user, extra?)));
        }
        let Some(alias) = alias? else {
            return Ok(None);
        };
        let pointer: Pointer = alias.data()?;
        let (user, extra) =
            tokio::join!(self.user(app, &pointer.named_user), beside(pointer.named_user.clone()));
        match user? {
            Some(user) => Ok(Some((user, extra?))),
            None => Ok(None),
        }
    }

    /// The user's devices, most recently registered last. A device recorded before its token's
    /// end was kept learns it from its token (read at once); records that keep it, every one
    /// written since, cost no read.
    pub async fn devices_of(&self, app: &AppId, named_user: &str) -> Result<Vec<DeviceRecord>, StoreError> {
        let mut devices = self.recorded_devices(app, named_user).await?;
        let legacy: Vec<usize> = (0..devices.len()).filter(|&i| devices[i].token_ends_at.is_none()).collect();
        let tokens = self.tokens_of(legacy.iter().map(|&i| &devices[i])).await?;
        for (&i, token) in legacy.iter().zip(tokens) {
            learn_token_end(&mut devices[i], token.as_ref());
        }
        Ok(devices)
    }

    /// [`Self::devices_of`], each device with its token if it has one: the tokens are read
    /// once, and a legacy record learns its token's end from them.
    pub async fn devices_and_tokens_of(
        &self,
        app: &AppId,
        named_user: &str,
    ) -> Result<Vec<(DeviceRecord, Option<DeviceTokenRecord>)>, StoreError> {
        let mut devices = self.recorded_devices(app, named_user).await?;
        let tokens = self.tokens_of(&devices).await?;
        for (device, token) in devices.iter_mut().zip(&tokens) {
            learn_token_end(device, token.as_ref());
        }
        Ok(devices.into_iter().zip(tokens).collect())
    }

    /// The user's device records as stored, most recently registered last.
    async fn recorded_devices(&self, app: &AppId, named_user: &str) -> Result<Vec<DeviceRecord>, StoreError> {
        let query =
            Query::table(user_pk(app, named_user)).sort(SortKey::BeginsWith("DEVICE#".into())).limit(100);
        let items = super::query_all(self.store, query).await?;
        let mut devices: Vec<DeviceRecord> = items.iter().map(Item::data).collect::<Result<_, _>>()?;
        devices.sort_by_key(|d| d.registered_at);
        Ok(devices)
    }

    pub async fn device(
        &self,
        app: &AppId,
        device_id: &str,
    ) -> Result<Option<(DeviceRecord, u64)>, StoreError> {
        let Some(guard) = self.store.get(&device_guard(app, device_id)).await? else {
            return Ok(None);
        };
        let pointer: Pointer = guard.data()?;
        self.device_of(app, &pointer.named_user, device_id).await
    }

    /// The device `device_id` of `named_user`, read where it is filed: one read, for a caller
    /// that knows the user (a device token names the user its device is filed under; a device
    /// never moves to another user, since registering takes a device id no device holds).
    pub async fn device_of(
        &self,
        app: &AppId,
        named_user: &str,
        device_id: &str,
    ) -> Result<Option<(DeviceRecord, u64)>, StoreError> {
        let key = device_key(app, named_user, device_id);
        self.store.get(&key).await?.map(|i| Ok((i.data()?, i.version))).transpose()
    }

    pub async fn device_token(&self, presented: &TokenHash) -> Result<Option<DeviceTokenRecord>, StoreError> {
        let key = token_key(&presented.token_id());
        self.store.get(&key).await?.map(|i| i.data()).transpose()
    }

    /// Consumes the link (at `link_version`) and registers the device, all or nothing. The
    /// user's record is written at the version read: an alias another registration, or an
    /// issued certificate, adds meanwhile makes this a conflict, read again, not a lost alias.
    pub async fn register(
        &self,
        digest: &str,
        link: &LinkRecord,
        link_version: u64,
        device: &DeviceRecord,
        token: &DeviceTokenRecord,
        now: EpochMillis,
    ) -> Result<(), RegistrationError> {
        retry_on_conflict(|| async {
            let app = &device.app_id;
            let used = link.used_by(&device.device_id, &token.token_id, now);
            let ttl = link.expires_at.plus_secs(LINK_KEPT_AFTER_EXPIRY_SECS).as_secs();
            let user_key = ItemKey::new(user_pk(app, &device.named_user), "USER");
            let existing_user = match self.store.get(&user_key).await? {
                Some(item) => Some((item.data::<UserRecord>()?, item.version)),
                None => None,
            };
            let mut user = existing_user.as_ref().map(|(user, _)| user.clone()).unwrap_or(UserRecord {
                app_id: app.clone(),
                named_user: device.named_user.clone(),
                aliases: Vec::new(),
                created_at: now,
            });
            let mut ops = vec![
                WriteOp::Put {
                    item: Item::new(link_key(digest), &used)?.with_ttl(Some(ttl)),
                    condition: Condition::Version(link_version),
                },
                WriteOp::Put {
                    item: Item::new(
                        device_guard(app, &device.device_id),
                        &Pointer { named_user: device.named_user.clone() },
                    )?,
                    condition: Condition::Absent,
                },
                WriteOp::Put {
                    item: Item::new(device_key(app, &device.named_user, &device.device_id), device)?,
                    condition: Condition::Absent,
                },
                WriteOp::Put {
                    item: Item::new(token_key(&token.token_id), token)?,
                    condition: Condition::Absent,
                },
            ];
            if let Some(alias) = &link.machine_user_name_ws {
                // An alias belongs to one user: written only if nobody holds it, kept if it is theirs.
                match self.store.get(&alias_key(app, alias)).await? {
                    Some(held) if held.data::<Pointer>()?.named_user != device.named_user => {
                        return Err(RegistrationError::AliasTaken(alias.clone()));
                    }
                    Some(_) => {}
                    None => {
                        let pointer = Pointer { named_user: device.named_user.clone() };
                        ops.push(WriteOp::Put {
                            item: Item::new(alias_key(app, alias), &pointer)?,
                            condition: Condition::Absent,
                        });
                    }
                }
                if !user.has_alias(alias) {
                    user.aliases.push(alias.clone());
                }
            }
            let user_condition =
                existing_user.map_or(Condition::Absent, |(_, version)| Condition::Version(version));
            ops.push(WriteOp::Put { item: Item::new(user_key, &user)?, condition: user_condition });
            match self.store.transact(ops).await {
                Ok(()) => Ok(()),
                Err(StoreError::Conflict) => {
                    // Say why: the code went first, or the device id is taken.
                    match self.link(digest).await? {
                        Some((current, _)) if current.used_at.is_some() => Err(RegistrationError::LinkUsed),
                        _ if self.store.get(&device_guard(app, &device.device_id)).await?.is_some() => {
                            Err(RegistrationError::DeviceExists(device.device_id.clone()))
                        }
                        // Otherwise read again and decide anew: an alias taken since the check
                        // is then found taken, a user changed since is read at its new version.
                        _ => Err(StoreError::Conflict.into()),
                    }
                }
                Err(e) => Err(e.into()),
            }
        })
        .await
    }

    /// Trades the device's token for `new` as `trade` says, and points the device at it, in one
    /// transaction: the token it holds stops working (but for a refresh, when superseded) as the
    /// new one starts. Only while the device stands at `version` and is not frozen
    /// ([`Self::freeze`]): a removal or a token's end makes this a conflict.
    pub async fn trade_token(
        &self,
        device: &DeviceRecord,
        version: u64,
        trade: &TokenTrade,
        new: &DeviceTokenRecord,
    ) -> Result<(), StoreError> {
        self.store.transact(trade_ops(device, version, trade, new)?).await
    }

    /// The link (at `link_version`) that registered `device` (at `version`) gives it `new` in
    /// place of the token it gave before, in one transaction; like [`Self::trade_token`], only
    /// while the device is not frozen.
    pub async fn register_again(
        &self,
        digest: &str,
        link: &LinkRecord,
        link_version: u64,
        device: &DeviceRecord,
        version: u64,
        new: &DeviceTokenRecord,
    ) -> Result<(), StoreError> {
        let ttl = link.expires_at.plus_secs(LINK_KEPT_AFTER_EXPIRY_SECS).as_secs();
        let mut ops = trade_ops(device, version, &TokenTrade::Replace, new)?;
        ops.push(WriteOp::Put {
            item: Item::new(link_key(digest), &link.gave_again(&new.token_id))?.with_ttl(Some(ttl)),
            condition: Condition::Version(link_version),
        });
        self.store.transact(ops).await
    }

    /// The device (at `version`) with its push registration set to `push`: a conflict when the
    /// device changed or went since it was read.
    pub async fn set_push(
        &self,
        device: &DeviceRecord,
        version: u64,
        push: Option<PushRegistration>,
    ) -> Result<DeviceRecord, StoreError> {
        let key = device_key(&device.app_id, &device.named_user, &device.device_id);
        let updated = DeviceRecord { push, ..device.clone() };
        self.store.put(Item::new(key, &updated)?, Condition::Version(version)).await?;
        Ok(updated)
    }

    /// The device (at `version`) with `push` as its push registration, holding its endpoint
    /// (and no longer one it held before), only while it is not frozen ([`Self::freeze`]): a
    /// conflict when the device changed or went since it was read, or its removal (or its
    /// token's end) began. The endpoint it moved off, if it did.
    pub async fn register_push(
        &self,
        device: &DeviceRecord,
        version: u64,
        push: PushRegistration,
    ) -> Result<Option<String>, StoreError> {
        let key = device_key(&device.app_id, &device.named_user, &device.device_id);
        let (app, device_id) = (&device.app_id, device.device_id.as_str());
        let holder =
            Item::new(holder_key(&push.endpoint, app, device_id), &Holder { app_id: app, device_id })?;
        let left =
            device.push.as_ref().map(|held| held.endpoint.clone()).filter(|held| *held != push.endpoint);
        let updated = DeviceRecord { push: Some(push), ..device.clone() };
        let mut ops = vec![
            WriteOp::Put { item: Item::new(key, &updated)?, condition: Condition::Version(version) },
            Self::unfrozen(app, device_id),
            WriteOp::Put { item: holder, condition: Condition::Any },
        ];
        ops.extend(hold_ends(device).filter(|_| left.is_some()));
        self.store.transact(ops).await?;
        Ok(left)
    }

    /// Whether any device holds the push endpoint `endpoint` (read consistently): one whose last
    /// holder went may be deleted.
    pub async fn endpoint_held(&self, endpoint: &str) -> Result<bool, StoreError> {
        let page = self.store.query(Query::table(holders_pk(endpoint)).limit(1)).await?;
        Ok(!page.items.is_empty())
    }

    /// Stops every later token swap of the device (before its removal or the end of its token).
    pub async fn freeze(&self, app: &AppId, device_id: &str) -> Result<(), StoreError> {
        self.store.put(frozen_item(app, device_id)?, Condition::Any).await?;
        Ok(())
    }

    /// The transaction step that holds only while the device is not frozen: a write that must
    /// not outlive the device's removal (a new pairing) carries it.
    pub fn unfrozen(app: &AppId, device_id: &str) -> WriteOp {
        WriteOp::Check { key: frozen_key(app, device_id), condition: Condition::Absent }
    }

    /// Whether the device was frozen: its token swaps are over.
    pub async fn is_frozen(&self, app: &AppId, device_id: &str) -> Result<bool, StoreError> {
        Ok(self.store.get(&frozen_key(app, device_id)).await?.is_some())
    }

    /// The device `device_id` of `named_user` in `app`, with its version, and whether it is
    /// frozen, read at once: what a write conditional on both starts from.
    pub async fn device_and_freeze(
        &self,
        app: &AppId,
        named_user: &str,
        device_id: &str,
    ) -> Result<(Option<(DeviceRecord, u64)>, bool), StoreError> {
        let (device, frozen) =
            tokio::join!(self.device_of(app, named_user, device_id), self.is_frozen(app, device_id));
        Ok((device?, frozen?))
    }

    /// The device token with this id.
    pub async fn token(&self, token_id: &str) -> Result<Option<DeviceTokenRecord>, StoreError> {
        self.store.get(&token_key(token_id)).await?.map(|i| i.data()).transpose()
    }

    /// The token of each of `devices`, in their order, read several at once (`super::at_once`):
    /// a user's list waits for about one read, not one per device.
    pub async fn tokens_of<'d>(
        &self,
        devices: impl IntoIterator<Item = &'d DeviceRecord>,
    ) -> Result<Vec<Option<DeviceTokenRecord>>, StoreError> {
        super::at_once(devices.into_iter().map(|device| self.token(&device.token_id)).collect()).await
    }

    /// Ends the token the device holds at `version` (the device says so from `now` on), and
    /// freezes the device: a conflict if the device moved on (a token swapped meanwhile),
    /// `Ok(false)` if it has no token.
    pub async fn revoke_token(
        &self,
        device: &DeviceRecord,
        version: u64,
        now: EpochMillis,
    ) -> Result<bool, StoreError> {
        let record = device_key(&device.app_id, &device.named_user, &device.device_id);
        let ended = Item::new(record.clone(), &device.clone().token_ended(now))?;
        let mut ops = vec![
            WriteOp::Put { item: ended, condition: Condition::Version(version) },
            WriteOp::Delete { key: token_key(&device.token_id), condition: Condition::Exists },
            WriteOp::Put { item: frozen_item(&device.app_id, &device.device_id)?, condition: Condition::Any },
        ];
        ops.extend(superseded_token_goes(device));
        match self.store.transact(ops).await {
            Ok(()) => Ok(true),
            // Which condition failed: a device still at `version` has no token to end.
            Err(StoreError::Conflict) => match self.store.get(&record).await? {
                Some(item) if item.version == version => Ok(false),
                _ => Err(StoreError::Conflict),
            },
            Err(e) => Err(e),
        }
    }

    /// Adds names the directory knows the user by (from an issued certificate), so the user
    /// stays one entity. A name that already stands for another user is left to that user and
    /// returned with that user, `(name, holder)`, so that the caller reports the refused claim.
    pub async fn add_aliases(
        &self,
        app: &AppId,
        named_user: &str,
        names: &[String],
    ) -> Result<Vec<(String, String)>, StoreError> {
        let key = ItemKey::new(user_pk(app, named_user), "USER");
        retry_on_conflict(|| async {
            let Some(item) = self.store.get(&key).await? else { return Ok(Vec::new()) };
            let mut user: UserRecord = item.data()?;
            let (mut ops, mut refused) = (Vec::new(), Vec::new());
            for name in names {
                if user.is_known_as(name) || name.is_empty() {
                    continue;
                }
                if let Some(held) = self.store.get(&alias_key(app, name)).await? {
                    let holder = held.data::<Pointer>()?.named_user;
                    if holder != named_user {
                        refused.push((name.clone(), holder));
                    }
                    continue;
                }
                user.aliases.push(name.clone());
                let pointer = Pointer { named_user: named_user.to_owned() };
                ops.push(WriteOp::Put {
                    item: Item::new(alias_key(app, name), &pointer)?,
                    condition: Condition::Absent,
                });
            }
            if !ops.is_empty() {
                ops.push(WriteOp::Put {
                    item: Item::new(key.clone(), &user)?,
                    condition: Condition::Version(item.version),
                });
                self.store.transact(ops).await?;
            }
            Ok(refused)
        })
        .await
    }

    /// Ends a device as it stands at `version`: its record, the token it holds then and its hold
    /// on its push endpoint go (its id stays taken in the app), it is frozen, and the event
    /// reports it, in one transaction. A token swapped meanwhile makes this a conflict (freeze,
    /// read again and remove).
    pub async fn revoke_device(
        &self,
        device: &DeviceRecord,
        version: u64,
        event: &rp_domain::events::EventRecord,
    ) -> Result<(), StoreError> {
        let record = device_key(&device.app_id, &device.named_user, &device.device_id);
        let mut ops = vec![
            WriteOp::Delete { key: record, condition: Condition::Version(version) },
            WriteOp::Put { item: frozen_item(&device.app_id, &device.device_id)?, condition: Condition::Any },
            WriteOp::Delete { key: token_key(&device.token_id), condition: Condition::Any },
        ];
        ops.extend(superseded_token_goes(device));
        ops.extend(hold_ends(device));
        super::events::transact_with(self.store, ops, event).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_users_devices_are_read_past_one_page_oldest_first() {
        let backend = crate::TestBackend::new();
        let app = AppId::parse("appId", "manyDevices").unwrap();
        // Device ids in the opposite order to their registration, over more than a page.
        for i in 0..105 {
            let device = DeviceRecord {
                app_id: app.clone(),
                named_user: "uma".into(),
                device_id: format!("dev-{:03}", 104 - i),
                friendly_name: "phone".into(),
                model_number: "m".into(),
                signing_public_key: String::new(),
                key_agreement_public_key: String::new(),
                registered_at: EpochMillis(1_000 + i),
                token_id: format!("t{i}"),
                token_ends_at: Some(EpochMillis(2_000)),
                push: None,
                superseded_token_id: None,
                token_issued_at: None,
            };
            let item = Item::new(device_key(&app, "uma", &device.device_id), &device).unwrap();
            backend.store.put(item, Condition::Absent).await.unwrap();
        }
        let devices = Devices::new(backend.store.as_ref()).devices_of(&app, "uma").await.unwrap();
        let registered: Vec<i64> = devices.iter().map(|d| d.registered_at.as_millis()).collect();
        assert_eq!(registered, (1_000..1_105).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_device_recorded_before_its_token_end_was_kept_learns_it_from_the_token() {
        let backend = crate::TestBackend::new();
        let devices = Devices::new(backend.store.as_ref());
        let app = AppId::parse("appId", "legacyDevices").unwrap();
        let now = EpochMillis(1_700_000_000_000);
        let token = DeviceTokenRecord {
            token_id: "live".into(),
            app_id: app.clone(),
            named_user: "lea".into(),
            device_id: "kept".into(),
            hash: String::new(),
            created_at: now,
            expires_at: Some(now.plus_secs(60)),
            superseded_until: None,
        };
        backend.store.put(Item::new(token_key("live"), &token).unwrap(), Condition::Absent).await.unwrap();
        for (i, (device_id, token_id)) in [("kept", "live"), ("ended", "gone")].into_iter().enumerate() {
            // As a release from before wrote it: no `tokenEndsAt`.
            let record = serde_json::json!({
                "appId": "legacyDevices", "namedUser": "lea", "deviceId": device_id, "friendlyName": "phone",
                "modelNumber": "m", "signingPublicKey": "", "keyAgreementPublicKey": "",
                "registeredAt": i, "tokenId": token_id,
            });
            let item = Item::new(device_key(&app, "lea", device_id), &record).unwrap();
            backend.store.put(item, Condition::Absent).await.unwrap();
        }
        let listed = devices.devices_of(&app, "lea").await.unwrap();
        let ends: Vec<_> = listed.iter().map(|d| (d.device_id.as_str(), d.token_ends_at)).collect();
        assert_eq!(ends, [("kept", Some(now.plus_secs(60))), ("ended", Some(EpochMillis(0)))]);
        assert!(listed[0].can_answer(now) && !listed[1].can_answer(now));
        let with_tokens = devices.devices_and_tokens_of(&app, "lea").await.unwrap();
        let (records, tokens): (Vec<_>, Vec<_>) = with_tokens.into_iter().unzip();
        assert_eq!(records, listed, "the same records, learnt from the tokens it returns");
        assert_eq!(tokens, [Some(token), None]);
    }
}
