//! The router suite, written once and run on every backend: `router_tests!(make)` expands to one
//! `#[tokio::test]` per case, where `make(clock)` builds a backend (or `None` to skip).
//! Cases share nothing but the backend: ids are unique per case, so they can run in parallel
//! against one DynamoDB table.

pub mod cases;
pub mod certificates;
pub mod code;
pub mod console;
pub mod content;
pub mod offline;
pub mod oob;
pub mod push;
pub mod workstation;

pub use cases::*;
pub use certificates::*;
pub use code::*;
pub use console::*;
pub use content::*;
pub use offline::*;
pub use oob::*;
pub use push::*;
pub use workstation::*;

use rp_shared::backend::Backend;
use rp_shared::domain::certificates::CertRequest;
use rp_shared::http::wire::certificates::CertificateRequestList;
use rp_shared::http::{self, AppState, HttpConfig};
use rp_shared::ports::{Clock, ManualClock};
use rp_shared::repo::certificates::Certificates;
use rp_shared::testing::http::{TestClient, TestResponse};
use rp_shared::testing::iam;
use rp_shared::testing::push::RecordingPush;
use serde_json::{json, Value};
use std::sync::Arc;

pub struct Harness {
    pub client: TestClient,
    pub admin: String,
    pub backend: Backend,
    pub clock: ManualClock,
    /// What the routers asked the push service to send.
    pub pushes: Arc<RecordingPush>,
    /// The AWS actions the requests' calls needed, by function ([`iam`]).
    pub needed: Arc<iam::Needed>,
    /// The case's own files (an agent's CA), removed with the harness.
    scratch: tempfile::TempDir,
}

/// What a router suite's backend factory makes: the backend, with the temporary directory its
/// data lives in where it has one (the embedded backend's), to be removed when the case ends.
pub trait Made {
    fn parts(self) -> (Backend, Option<tempfile::TempDir>);
}

impl Made for Backend {
    fn parts(self) -> (Backend, Option<tempfile::TempDir>) {
        (self, None)
    }
}

impl Made for (Backend, tempfile::TempDir) {
    fn parts(self) -> (Backend, Option<tempfile::TempDir>) {
        (self.0, Some(self.1))
    }
}

/// What each of `racers` answered, in their order; a racer's panic is the case's.
pub async fn joined<T>(racers: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut answers = Vec::with_capacity(racers.len());
    for racer in racers {
        answers.push(racer.await.unwrap());
    }
    answers
}

impl Harness {
    /// The harness, for a case that races transactions; `None` (the case skips, saying why)
    /// where the store does not isolate them (moto).
    pub fn for_races(self) -> Option<Self> {
        (!rp_shared::testing::aws::transactions_race_unsafely(self.backend.store.as_ref())).then_some(self)
    }

    pub async fn new(backend: Backend, clock: ManualClock) -> Self {
        Self::with_config(backend, clock, HttpConfig { body_limit: 16 * 1024, ..HttpConfig::default() }).await
    }

    /// A harness on this one's store and clock whose routers run with `config`.
    pub async fn configured(&self, config: HttpConfig) -> Self {
        Self::with_config(self.backend.clone(), self.clock.clone(), config).await
    }

    /// A harness whose routers run with `config`.
    pub async fn with_config(backend: Backend, clock: ManualClock, config: HttpConfig) -> Self {
        let admin =
            rp_shared::testing::fixtures::admin_token(backend.store.as_ref(), clock.now_millis()).await;
        let pushes = Arc::new(RecordingPush::new(backend.push.clone()));
        let backend = Backend { push: pushes.clone(), ..backend };
        let needed = Arc::new(iam::Needed::default());
        let state = AppState::new(iam::noting(&backend, &needed), config);
        let scratch = tempfile::Builder::new().prefix("rp-case-").tempdir().expect("a temp dir");
        Self { client: TestClient::new(http::app(state)), admin, backend, clock, pushes, needed, scratch }
    }

    /// A fresh directory of the case's own, removed with the harness.
    pub fn scratch_dir(&self) -> std::path::PathBuf {
        tempfile::tempdir_in(self.scratch.path()).expect("a temp dir").keep()
    }

    /// Runs `call` on this harness's backend with its writes and key calls held, past its reads:
    /// a race held open at its narrowest. It answers once the call waits at the gate (or has
    /// ended without a write), and 100 ms more for reads running beside that first write; the
    /// gate lets the rest go (or refuses it). Waiting for the gate, not a fixed time, keeps a
    /// loaded machine from letting a removal run before the call's reads.
    pub async fn held<T, F>(
        &self,
        call: impl FnOnce(AppState) -> F,
    ) -> (rp_shared::ports::held::Gate, tokio::task::JoinHandle<T>)
    where
        F: std::future::Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let (gate, pass) = rp_shared::ports::held::Gate::new();
        let state = AppState::new(self.backend.clone(), HttpConfig::default()).held(&pass);
        let task = tokio::spawn(call(state));
        let waited = tokio::time::timeout(std::time::Duration::from_secs(30), async {
            while !gate.is_reached() && !task.is_finished() {
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
        });
        waited.await.expect("the held call came to its first write");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        (gate, task)
    }

    /// Runs `call` held past its reads ([`Self::held`]) while the admin's `DELETE path` runs to
    /// its 204, then lets it go on: its outcome, where the removal began first.
    pub async fn held_past_removal<T, F>(&self, path: &str, call: impl FnOnce(AppState) -> F) -> T
    where
        F: std::future::Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let (gate, task) = self.held(call).await;
        let removed = self.admin("DELETE", path, None).await;
        assert_eq!(removed.status, 204, "{}", removed.json());
        gate.open(true);
        task.await.expect("the held call ran")
    }

    /// One poll of the certificate queue, as the agent makes it.
    pub async fn poll(&self) -> CertificateRequestList {
        let r = self.admin("GET", "/rp/api/certificate/requests", None).await;
        assert_eq!(r.status, 200, "{}", r.json());
        serde_json::from_value(r.json()).expect("the seed's request list")
    }

    /// Posts an issuance result (success or error payload).
    pub async fn post_issuance(&self, body: Value) -> TestResponse {
        self.admin("POST", "/rp/api/certificate", Some(body)).await
    }

    /// Posts a revocation result.
    pub async fn post_revocation(&self, body: Value) -> TestResponse {
        self.admin("POST", "/rp/api/certificate/revoke", Some(body)).await
    }

    /// The stored certificate request.
    pub async fn request(&self, id: &str) -> CertRequest {
        Certificates::new(self.backend.store.as_ref()).request(id).await.unwrap().expect("a stored request").0
    }

    pub fn unique(prefix: &str) -> String {
        format!("{prefix}{}", &uuid::Uuid::new_v4().simple().to_string()[..10])
    }

    pub async fn admin(&self, method: &str, path: &str, body: Option<Value>) -> TestResponse {
        self.client.send(method, path, Some(&self.admin), body).await
    }

    /// A request as the global admin acting for `tenant` (`X-Tenant-Id`).
    pub async fn as_tenant(
        &self,
        tenant: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> TestResponse {
        self.client.send_with(method, path, Some(&self.admin), &[("x-tenant-id", tenant)], body).await
    }

    /// Creates a token of `kind` scoped to `app_id` and returns it.
    pub async fn token_for(&self, kind: &str, app_id: &str) -> String {
        let r = self.admin("POST", "/cc/api/tokens", Some(json!({"kind": kind, "appId": app_id}))).await;
        assert_eq!(r.status, 201, "{}", r.json());
        r.json()["token"].as_str().unwrap().to_owned()
    }

    /// Creates an app with a unique id and returns the id.
    pub async fn app(&self) -> String {
        let id = Self::unique("app");
        let r = self.admin("POST", "/cc/api/apps", Some(json!({"appId": id, "displayName": "Demo"}))).await;
        assert_eq!(r.status, 201, "{}", r.json());
        id
    }

    /// Creates an access token for `app_id` and returns the token.
    pub async fn access_token(&self, app_id: &str) -> String {
        let r = self.admin("POST", "/cc/api/tokens", Some(json!({"kind": "access", "appId": app_id}))).await;
        assert_eq!(r.status, 201, "{}", r.json());
        r.json()["token"].as_str().unwrap().to_owned()
    }
}

#[macro_export]
macro_rules! router_tests {
    ($make:ident) => {
        $crate::router_case!($make, health_needs_no_token);
        $crate::router_case!($make, console_sessions_are_strict_cookies_that_stand_for_the_token);
        $crate::router_case!($make, console_sign_in_refuses_bad_tokens_and_limits_failures);
        $crate::router_case!($make, console_forms_need_the_sessions_csrf_token);
        $crate::router_case!($make, console_forms_carry_the_largest_source_and_no_more);
        $crate::router_case!($make, console_operator_tasks_reach_the_api);
        $crate::router_case!($make, console_tokens_show_their_state_and_their_revoke_button_works);
        $crate::router_case!($make, console_lists_page_with_their_own_cursors);
        $crate::router_case!($make, console_create_forms_sent_twice_create_once);
        $crate::router_case!($make, console_scoped_admins_see_only_their_app);
        $crate::router_case!($make, console_renders_hostile_values_as_text);
        $crate::router_case!($make, console_watches_the_queue_and_revokes_a_certificate);
        $crate::router_case!($make, console_shows_the_newest_certificate_events_of_the_week);
        $crate::router_case!($make, console_events_table_shows_the_newest_past_the_timelines_count);
        $crate::router_case!($make, console_shows_a_customizations_newest_versions_first);
        $crate::router_case!($make, unknown_routes_and_methods_are_problems);
        $crate::router_case!($make, every_response_has_a_request_id);
        $crate::router_case!($make, missing_or_malformed_authorization_is_401);
        $crate::router_case!($make, unknown_expired_and_revoked_tokens_are_401);
        $crate::router_case!($make, access_tokens_are_403_on_admin_routes);
        $crate::router_case!($make, apps_are_created_read_and_listed);
        $crate::router_case!($make, app_ids_are_unique_even_under_races);
        $crate::router_case!($make, app_input_is_validated_field_by_field);
        $crate::router_case!($make, malformed_bodies_are_refused_cleanly);
        $crate::router_case!($make, undecodable_path_parameters_are_named_as_documented);
        $crate::router_case!($make, workstation_settings_have_defaults_and_bounds);
        $crate::router_case!($make, tokens_are_created_listed_and_revoked);
        $crate::router_case!($make, token_input_is_validated);
        $crate::router_case!($make, lists_reject_foreign_cursors_and_bad_limits);
        $crate::router_case!($make, inputs_dynamodb_would_refuse_never_reach_it);
        $crate::router_case!($make, content_customizations_round_trip);
        $crate::router_case!($make, content_lists_page_and_count);
        $crate::router_case!($make, content_input_is_validated_with_paths);
        $crate::router_case!($make, content_is_isolated_per_tenant);
        $crate::router_case!($make, content_rate_limit_headers_and_429);
        $crate::router_case!($make, content_versions_and_restore);
        $crate::router_case!($make, content_races_lose_nothing);
        $crate::router_case!($make, twenty_concurrent_updates_each_succeed);
        $crate::router_case!($make, a_create_sent_again_under_its_key_is_stored_once);
        $crate::router_case!($make, content_maps_round_trip_and_merge_per_rfc_7396);
        $crate::router_case!($make, content_size_is_capped_and_versions_are_retained);
        $crate::router_case!($make, registration_links_and_qr_page);
        $crate::router_case!($make, device_registration_validates_and_is_single_use);
        $crate::router_case!($make, a_registration_keeps_a_name_learnt_while_it_ran);
        $crate::router_case!($make, a_free_alias_goes_to_the_first_registration);
        $crate::router_case!($make, enrollment_ties_enroll_to_complete);
        $crate::router_case!($make, pairing_queues_one_certificate_request);
        $crate::router_case!($make, events_are_reported_and_listed);
        $crate::router_case!($make, each_apps_events_are_stored_apart_and_listed_across_apps);
        $crate::router_case!($make, a_reported_event_sent_again_is_stored_once);
        $crate::router_case!($make, a_report_held_while_its_repeat_lands_stores_one_event);
        $crate::router_case!($make, link_to_queued_certificate_request_end_to_end);
        $crate::router_case!($make, certificate_poll_and_results_contract);
        $crate::router_case!($make, agent_issues_and_the_device_decrypts);
        $crate::router_case!($make, the_agent_writes_each_users_sid_from_its_map);
        $crate::router_case!($make, revocation_round_trip);
        $crate::router_case!($make, a_revoked_certificate_fails_against_the_published_crl);
        $crate::router_case!($make, a_crl_larger_than_one_item_is_published_whole);
        $crate::router_case!($make, a_certificate_near_its_end_is_renewed_and_replaces_the_old_one);
        $crate::router_case!($make, an_admin_revocation_takes_the_waiting_renewal_with_it);
        $crate::router_case!($make, unpairing_wins_over_a_renewal_delivered_at_once);
        $crate::router_case!($make, a_certificate_issued_after_its_pairing_ended_is_revoked);
        $crate::router_case!($make, unpairing_wins_over_the_first_issue_of_its_certificate);
        $crate::router_case!($make, an_unpairing_that_read_before_the_issue_revokes_it);
        $crate::router_case!($make, a_rename_read_before_a_new_pairing_keeps_the_new_pairing);
        $crate::router_case!($make, a_full_queue_in_one_app_holds_back_no_other_apps_renewal);
        $crate::router_case!($make, leases_time_out_requeue_and_die);
        $crate::router_case!($make, a_poll_sends_one_time_out_message_per_time_out);
        $crate::router_case!($make, late_results_honour_the_configured_max_attempts);
        $crate::router_case!($make, a_lost_dead_letter_is_sent_when_the_time_out_comes_again);
        $crate::router_case!($make, a_flood_from_one_app_does_not_delay_another);
        $crate::router_case!($make, an_app_at_its_cap_cannot_queue_more);
        $crate::router_case!($make, a_pairing_that_loses_the_last_place_is_told_the_queue_is_full);
        $crate::router_case!($make, a_small_batch_skips_apps_drained_within_the_grace_period);
        $crate::router_case!($make, a_poll_fills_its_batch_from_an_app_with_more);
        $crate::router_case!($make, polls_take_the_ready_apps_in_turn);
        $crate::router_case!($make, version_1_envelopes_are_still_served);
        $crate::router_case!($make, the_poll_names_the_workstation_user_from_what_is_known);
        $crate::router_case!($make, an_agents_failure_events_are_filed_under_the_requests_app);
        $crate::router_case!($make, the_workstation_sees_its_pairings_certificate);
        $crate::router_case!($make, recovery_keys_reach_the_enrolled_device_in_authentication);
        $crate::router_case!($make, code_customizations_keep_versions_and_env_values_stay_secret);
        $crate::router_case!($make, environment_variables_stay_within_their_caps);
        $crate::router_case!($make, an_app_past_its_key_budget_is_refused_and_no_other_is);
        $crate::router_case!($make, the_oob_start_hook_allows_denies_and_rewrites);
        $crate::router_case!($make, the_oob_start_hook_follows_enable_restore_and_delete);
        $crate::router_case!($make, a_replayed_oob_start_is_refused_before_the_hook_runs);
        $crate::router_case!($make, the_oob_start_hooks_share_one_time_budget);
        $crate::router_case!($make, an_oob_start_runs_no_customization_past_a_refusal);
        $crate::router_case!($make, a_tenants_jwks_verifies_the_tokens_it_mints);
        $crate::router_case!($make, each_tenant_signs_with_a_key_of_its_own);
        $crate::router_case!($make, a_tenant_rotates_and_retires_its_signing_keys);
        $crate::router_case!($make, racing_rotations_lose_no_key);
        $crate::router_case!($make, racing_results_with_one_serial_store_it_once);
        $crate::router_case!($make, identical_results_racing_are_each_answered_204);
        $crate::router_case!($make, the_first_valid_result_wins_whichever_lease);
        $crate::router_case!($make, directory_names_join_their_user_unless_taken);
        $crate::router_case!($make, pairing_is_bound_to_enrollment_and_names);
        $crate::router_case!($make, oob_login_completes_with_a_signed_approval);
        $crate::router_case!($make, oob_declines_bad_signatures_and_wrong_numbers);
        $crate::router_case!($make, oob_requests_expire_and_nonces_are_spent);
        $crate::router_case!($make, a_new_request_reaches_the_device_past_expired_ones);
        $crate::router_case!($make, requests_go_past_devices_whose_token_ended);
        $crate::router_case!($make, oob_input_and_tenancy_are_checked);
        $crate::router_case!($make, racing_oob_answers_have_one_winner);
        $crate::router_case!($make, a_removal_wins_over_an_answer_in_flight);
        $crate::router_case!($make, an_answer_that_loses_its_race_decides_again);
        $crate::router_case!($make, a_removal_wins_over_a_start_in_flight);
        $crate::router_case!($make, the_device_list_answers_what_hypr_clients_read);
        $crate::router_case!($make, the_clients_the_docs_list_as_refused_are_refused_as_they_say);
        $crate::router_case!($make, a_start_goes_to_the_device_the_caller_names);
        $crate::router_case!($make, devices_are_woken_when_there_is_something_to_fetch);
        $crate::router_case!($make, removing_a_device_deletes_its_push_endpoint);
        $crate::router_case!($make, a_registration_past_the_end_of_its_token_leaves_no_endpoint);
        $crate::router_case!($make, a_push_endpoint_stays_while_another_device_holds_it);
        $crate::router_case!($make, a_gone_endpoint_is_disabled_unless_the_device_moved_on);
        $crate::router_case!($make, a_registration_that_loses_a_race_reads_the_device_again);
        $crate::router_case!($make, a_token_the_platform_refuses_is_told_without_its_words);
        $crate::router_case!($make, a_device_fetch_waits_for_a_request_to_arrive);
        $crate::router_case!($make, an_enroll_named_by_its_session_needs_no_workstation_name);
        $crate::router_case!($make, a_machine_stays_with_the_workstation_that_enrolled_it);
        $crate::router_case!($make, offline_pins_go_to_the_owner_and_the_device_once);
        $crate::router_case!($make, a_token_end_wins_over_a_pin_fetch_in_flight);
        $crate::router_case!($make, a_pin_fetch_that_loses_a_race_to_a_rename_reads_again);
        $crate::router_case!($make, a_workstation_is_active_only_while_its_delivered_pins_are_valid);
        $crate::router_case!($make, used_pins_are_deleted_and_warn_when_low);
        $crate::router_case!($make, racing_pin_reports_all_land);
        $crate::router_case!($make, wrong_attempts_lock_offline_access);
        $crate::router_case!($make, unpairing_queues_the_revocation_the_agent_carries_out);
        $crate::router_case!($make, removing_a_device_ends_its_token_pairings_and_certificates);
        $crate::router_case!($make, removing_a_device_queues_again_a_revocation_that_failed);
        $crate::router_case!($make, removing_a_device_unpairs_it_everywhere_past_one_page);
        $crate::router_case!($make, removing_a_device_revokes_the_certificate_of_every_pairing);
        $crate::router_case!($make, removal_wins_over_pairings_made_while_it_runs);
        $crate::router_case!($make, device_tokens_expire_refresh_and_can_be_revoked);
        $crate::router_case!($make, a_refresh_whose_reply_was_lost_can_be_sent_again);
        $crate::router_case!($make, a_registration_whose_reply_was_lost_can_be_sent_again);
        $crate::router_case!($make, removal_and_token_end_win_over_token_rotations);
        $crate::router_case!($make, concurrent_pollers_issue_each_request_once);
    };
}

#[macro_export]
macro_rules! router_case {
    ($make:ident, $name:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let clock = rp_shared::ports::ManualClock::starting_now();
            let Some(made) = $make(clock.clone()).await else {
                return;
            };
            // The backend's data directory, where it has one, goes when the case ends.
            let (backend, _data) = common::Made::parts(made);
            let harness = common::Harness::new(backend, clock).await;
            let needed = harness.needed.clone();
            common::$name(harness).await;
            let refused = needed.refused();
            assert!(refused.is_empty(), "calls the function's role does not allow:\n{}", refused.join("\n"));
        }
    };
}
