//! The code-customization sandbox: a tenant's JavaScript run in QuickJS (`rquickjs`), one fresh
//! runtime and context per run, with the helpers of DECISIONS §8, the tenant's environment
//! variables as `env`, `console.log` (and its levels) captured, and an `api` object for the hook.
//!
//! Containment:
//! - QuickJS has no file, network, process, module loader or timers unless the host adds them,
//!   and this host adds none: the globals are the language's own and the ones below. The one
//!   module a script can import is the run's prelude (`rp:prelude`), whose export does
//!   nothing once it has run.
//! - Limits: a memory limit (64 MiB by default), a stack limit, and an interrupt handler that
//!   ends the run at its wall-clock deadline.
//! - QuickJS asks the interrupt handler only every 10,000 operations, and one operation can be
//!   costly. Past the deadline, large allocations fail ([`LATE_ALLOCATION_BYTES`]): a loop that
//!   catches its own out-of-memory errors, which ran 25 s past a 1 ms deadline, now stops
//!   within milliseconds. Operations that allocate nothing (filling or searching a large array
//!   10,000 times) can still run long. An array's methods loop in C over its `length`, which
//!   holes (`new Array(2 ** 32 - 1)`) or an array-like set as high as they like while
//!   allocating nothing: on an array longer than memory could hold densely, or on anything
//!   but an array, they run on a view whose property accesses are JavaScript, so the deadline
//!   is asked as they go (`prelude.js`); the answers are the same. A string search compares
//!   in C at each place the first character matches: where the string's length times the
//!   searched one's is over [`SEARCH_BUDGET`], the prelude makes the search, a short piece in C
//!   at a time.
//! - So each run also gets its own OS thread and a watchdog: the caller gets its answer (a
//!   time-out error) at the deadline plus [`BACKSTOP`] whatever the thread is doing. A thread
//!   still running then is abandoned: its memory stays capped, the interrupt ends it once
//!   polled (host functions pass it on: `from_script`), and it is lowered to the least CPU
//!   priority (Linux), so that it takes CPU only when nothing else wants it. A tenant whose
//!   last run ran out of time runs its next one at a lower priority too ([`OVERRUNNING_NICE`]),
//!   so code that keeps hitting its limit yields the cores to other tenants' runs.
//! - Tenants are kept apart: each tenant has its own run slots ([`runs_per_tenant`], waited for
//!   up to the run's own time limit) and its own count of abandoned runs; while one of its runs
//!   is abandoned, that tenant's new runs fail at once ("overran its limits"). No count is
//!   shared, so one tenant's hostile code makes only that tenant's runs wait or fail.
//!   A thread cannot be killed, but a process could be. A worker process per run was weighed:
//!   it would cost a process start per run and a signing channel back to the host, against
//!   a per-run budget of 1 ms.
//! - Values of `env` are scrubbed from `logs`, `error`, `result` and what the hook asks for.

pub mod helpers;

use p256::ecdsa::signature::Signer as _;
use p256::ecdsa::SigningKey;
use rp_domain::code::{HookActions, RunReport, MAX_HOOK_TEXT};
use rquickjs::allocator::{Allocator, RustAllocator};
use rquickjs::{
    CatchResultExt, CaughtError, Context, Ctx, Exception, Function, Module, Object, Runtime, Type, Value,
    WriteOptions,
};
use serde_json::Value as Json;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// The memory limit of one run.
pub const DEFAULT_MEMORY_BYTES: usize = 64 * 1024 * 1024;
/// What QuickJS holds one element of a dense array in: an array longer than the memory limit
/// over this is mostly holes, and its methods are paced (prelude.js).
const JS_VALUE_BYTES: usize = 16;
/// The most characters one string search may compare in C, where no interrupt reaches it: the
/// string's length times the searched one's. A larger search is paced (prelude.js).
pub const SEARCH_BUDGET: usize = 1_000_000;
/// QuickJS's own stack limit; the run's thread has `THREAD_STACK_BYTES`.
pub const STACK_BYTES: usize = 1024 * 1024;
const THREAD_STACK_BYTES: usize = 8 * 1024 * 1024;
/// How long past its deadline a run may take before the watchdog answers for it.
pub const BACKSTOP: Duration = Duration::from_secs(1);
/// `console.log` bounds: lines, characters per line, characters in all.
pub const MAX_LOG_LINES: usize = 100;
pub const MAX_LOG_LINE: usize = 2_000;
pub const MAX_LOG_TOTAL: usize = 32 * 1024;
/// Largest input a helper takes, in bytes.
pub const MAX_HELPER_INPUT: usize = 1024 * 1024;
/// Tokens one run may sign with `jwtCreateSignedJwt`: each is an ECDSA signature on the run's
/// thread, CPU a run should not spend without bound.
pub const MAX_SIGNATURES_PER_RUN: usize = 10;

/// One run: the tenant, the source, the event, the tenant's environment and issuer.
#[derive(Clone)]
pub struct Job {
    /// Whose run this is: runs are scheduled and limited per tenant.
    pub tenant: String,
    pub source: String,
    pub event: Json,
    pub env: BTreeMap<String, String>,
    /// `iss` of the tokens `jwtCreateSignedJwt` mints: the tenant's JWKS issuer.
    pub issuer: String,
    pub timeout: Duration,
    pub memory_bytes: usize,
}

/// How many runs of one tenant may run at once: half the cores, at least one, so that one
/// tenant's runs can never take every core.
pub fn runs_per_tenant() -> usize {
    static RUNS: OnceLock<usize> = OnceLock::new();
    *RUNS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1)))
}

/// One tenant's share of the sandbox: its run slots and its runs past their backstop.
struct Share {
    slots: Arc<Semaphore>,
    abandoned: AtomicUsize,
    /// Whether the tenant's last run ran out of time: its next run starts at a lower CPU
    /// priority ([`OVERRUNNING_NICE`]), so code that keeps hitting its limit yields to others.
    overran: AtomicBool,
}

fn share(tenant: &str) -> Arc<Share> {
    static SHARES: OnceLock<Mutex<HashMap<String, Arc<Share>>>> = OnceLock::new();
    let mut shares = SHARES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    shares
        .entry(tenant.to_owned())
        .or_insert_with(|| {
            Arc::new(Share {
                slots: Arc::new(Semaphore::new(runs_per_tenant())),
                abandoned: AtomicUsize::new(0),
                overran: AtomicBool::new(false),
            })
        })
        .clone()
}

/// Where a run's thread is: the watchdog and the thread settle it under one lock, so that the
/// thread cannot end (and its id be reused) while the watchdog lowers its priority.
enum Phase {
    Running { thread: Option<i32> },
    Finished,
    Abandoned,
}

/// Runs `job` on a thread of its own and answers within its timeout plus [`BACKSTOP`], after
/// waiting at most as long for one of its tenant's run slots.
pub async fn run(signer: Arc<dyn JwtSigner>, job: Job) -> RunReport {
    let started = Instant::now();
    let share = share(&job.tenant);
    if share.abandoned.load(Ordering::SeqCst) > 0 {
        return failed(
            "an earlier run of this tenant overran its limits and still runs; try again later",
            started,
        );
    }
    let timeout = job.timeout;
    let deadline = timeout + BACKSTOP;
    let slot = match tokio::time::timeout(deadline, share.slots.clone().acquire_owned()).await {
        Ok(Ok(slot)) => slot,
        _ => return failed("the sandbox is busy with this tenant's other runs; try again later", started),
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let handle = tokio::runtime::Handle::current();
    let phase = Arc::new(Mutex::new(Phase::Running { thread: None }));
    let (seen, mine) = (phase.clone(), share.clone());
    let spawned =
        std::thread::Builder::new().name("sandbox".into()).stack_size(THREAD_STACK_BYTES).spawn(move || {
            let thread = current_thread();
            if let (Some(id), true) = (thread, mine.overran.load(Ordering::SeqCst)) {
                lower_priority(id, OVERRUNNING_NICE);
            }
            *lock(&seen) = Phase::Running { thread };
            let report = run_blocking(&job, &Rc::new(Signer { signer, handle, key: RefCell::new(None) }));
            mine.overran.store(ran_out_of_time(&report.error), Ordering::SeqCst);
            let mut phase = lock(&seen);
            if matches!(*phase, Phase::Abandoned) {
                mine.abandoned.fetch_sub(1, Ordering::SeqCst);
            }
            *phase = Phase::Finished;
            drop(phase);
            drop(slot);
            let _ = tx.send(report);
        });
    if let Err(e) = spawned {
        return failed(&format!("the sandbox could not start: {e}"), started);
    }
    match tokio::time::timeout(deadline, rx).await {
        Ok(Ok(report)) => report,
        _ => {
            let mut current = lock(&phase);
            if let Phase::Running { thread } = *current {
                share.abandoned.fetch_add(1, Ordering::SeqCst);
                *current = Phase::Abandoned;
                share.overran.store(true, Ordering::SeqCst);
                if let Some(thread) = thread {
                    lower_priority(thread, ABANDONED_NICE);
                }
            }
            drop(current);
            tracing::warn!(timeout_ms = job_ms(deadline), "sandbox run abandoned past its backstop");
            rp_ports::metrics::count(rp_ports::metrics::Metric::SandboxTimeouts, 1, None);
            failed(&timed_out_after(timeout), started)
        }
    }
}

fn lock(phase: &Mutex<Phase>) -> std::sync::MutexGuard<'_, Phase> {
    phase.lock().unwrap_or_else(|e| e.into_inner())
}

/// The calling thread's id, for [`lower_priority`].
#[cfg(target_os = "linux")]
fn current_thread() -> Option<i32> {
    // SAFETY: gettid has no preconditions.
    Some(unsafe { libc::gettid() })
}

#[cfg(not(target_os = "linux"))]
fn current_thread() -> Option<i32> {
    None
}

/// The nice value of a run whose tenant's last run ran out of time.
pub const OVERRUNNING_NICE: i32 = 10;
/// The nice value of an abandoned run: the least priority.
pub const ABANDONED_NICE: i32 = 19;

/// Sets the nice value of thread `id` of this process: Linux keeps one per thread, and raising
/// one's own needs no privilege.
#[cfg(target_os = "linux")]
pub(crate) fn lower_priority(id: i32, nice: i32) {
    // SAFETY: setpriority only reads its arguments; an id that is no thread fails with ESRCH.
    let done = unsafe { libc::setpriority(libc::PRIO_PROCESS, id as libc::id_t, nice) };
    if done != 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "could not lower a sandbox run's priority");
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn lower_priority(_id: i32, _nice: i32) {}

/// The error of a run that ran out of its time, `timeout`.
fn timed_out_after(timeout: Duration) -> String {
    format!("timed out after {} ms", job_ms(timeout))
}

/// Whether a run's error is its time limit's ([`timed_out_after`]).
fn ran_out_of_time(error: &Option<String>) -> bool {
    error.as_deref().is_some_and(|e| e.starts_with("timed out"))
}

fn job_ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

fn failed(error: &str, started: Instant) -> RunReport {
    RunReport {
        result: Json::Null,
        logs: Vec::new(),
        duration_ms: job_ms(started.elapsed()),
        error: Some(error.to_owned()),
        actions: HookActions::default(),
    }
}

/// The tenant's key for `jwtCreateSignedJwt`, fetched through the async [`JwtSigner`] from the
/// run's thread on its first signature.
struct Signer {
    signer: Arc<dyn JwtSigner>,
    handle: tokio::runtime::Handle,
    /// The tenant's key and its id, fetched on the run's first signature.
    key: RefCell<Option<(String, SigningKey)>>,
}

impl Signer {
    /// The tenant's active key and its id, fetched on the run's first signature.
    fn key(&self) -> Result<std::cell::Ref<'_, (String, SigningKey)>, String> {
        if self.key.borrow().is_none() {
            *self.key.borrow_mut() = Some(self.handle.block_on(self.signer.signing_key())?);
        }
        Ok(std::cell::Ref::map(self.key.borrow(), |key| key.as_ref().expect("fetched above")))
    }
}

/// The tenant's token-signing key, as `jwtCreateSignedJwt` needs it.
#[async_trait::async_trait]
pub trait JwtSigner: Send + Sync {
    /// The tenant's active key and its `kid`: asked once per run, on its first signature.
    async fn signing_key(&self) -> Result<(String, SigningKey), String>;
}

/// One key, always: for a caller with a key of its own (a benchmark, a test of the sandbox).
pub struct OneKey {
    pub kid: String,
    pub key: SigningKey,
}

#[async_trait::async_trait]
impl JwtSigner for OneKey {
    async fn signing_key(&self) -> Result<(String, SigningKey), String> {
        Ok((self.kid.clone(), self.key.clone()))
    }
}

/// What the script's calls left behind.
#[derive(Default)]
struct Captured {
    logs: Vec<String>,
    log_chars: usize,
    dropped: usize,
    actions: HookActions,
}

impl Captured {
    fn log(&mut self, line: String) {
        let line: String = line.chars().take(MAX_LOG_LINE).collect();
        let len = line.chars().count();
        if self.logs.len() >= MAX_LOG_LINES || self.log_chars + len > MAX_LOG_TOTAL {
            self.dropped += 1;
            return;
        }
        self.log_chars += len;
        self.logs.push(line);
    }
}

/// Runs the job on this thread: a fresh runtime and context, so nothing of one run reaches
/// the next.
fn run_blocking(job: &Job, signer: &Rc<Signer>) -> RunReport {
    let started = Instant::now();
    let captured = Rc::new(RefCell::new(Captured::default()));
    let outcome = evaluate(job, signer, &captured, started);
    let captured = Rc::try_unwrap(captured).map(RefCell::into_inner).unwrap_or_default();
    let scrub = |text: String| scrub(text, &job.env);
    let mut logs: Vec<String> = captured.logs.into_iter().map(scrub).collect();
    if captured.dropped > 0 {
        logs.push(format!("[{} more log lines dropped]", captured.dropped));
    }
    let (result, error) = match outcome {
        Ok(result) => (scrub_json(result, &job.env), None),
        Err(error) => (Json::Null, Some(scrub(error))),
    };
    if ran_out_of_time(&error) {
        rp_ports::metrics::count(rp_ports::metrics::Metric::SandboxTimeouts, 1, None);
    }
    // What the hook asks for leaves the sandbox too: into a 403's detail, an event, a log line,
    // and the text the phone shows.
    let actions = HookActions {
        denied: captured.actions.denied.map(scrub),
        transaction_text: captured.actions.transaction_text.map(scrub),
    };
    RunReport { result, logs, duration_ms: job_ms(started.elapsed()), error, actions }
}

/// [`scrub`] over every string of `value`, keys included: a value holding `"` or `\` is
/// escaped in JSON text, where a search of the text would miss it.
fn scrub_json(value: Json, env: &BTreeMap<String, String>) -> Json {
    match value {
        Json::String(text) => Json::String(scrub(text, env)),
        Json::Array(items) => Json::Array(items.into_iter().map(|v| scrub_json(v, env)).collect()),
        Json::Object(map) => {
            Json::Object(map.into_iter().map(|(k, v)| (scrub(k, env), scrub_json(v, env))).collect())
        }
        other => other,
    }
}

/// Replaces every value of `env` (of 4 characters or more) in `text`.
fn scrub(mut text: String, env: &BTreeMap<String, String>) -> String {
    for (name, value) in env {
        if value.chars().count() >= 4 && text.contains(value.as_str()) {
            text = text.replace(value.as_str(), &format!("[env.{name}]"));
        }
    }
    text
}

/// Past the run's deadline, allocations of more than this many bytes fail.
pub const LATE_ALLOCATION_BYTES: usize = 16 * 1024;

/// The run's allocator: Rust's, holding the run to its memory limit, and past the deadline
/// refusing large allocations too.
///
/// The limit is kept here rather than by QuickJS, so that a refusal is known for what it is:
/// QuickJS reports running out of memory with an `InternalError`, but when even that error
/// cannot be allocated (a script that fills memory with small objects) it throws `null`, which
/// a script can throw too. `out_of_memory` tells them apart.
///
/// QuickJS asks the interrupt handler only every 10,000 operations, and a script can make each
/// of them costly: a loop that builds megabyte strings until it runs out of memory, catches the
/// error and starts again ran 25 s past a 1 ms deadline. Refusing large allocations once the
/// deadline has passed makes each such operation fail at once, so the next poll comes quickly
/// and ends the run with an error the script cannot catch; small allocations still succeed, so
/// that error can be built.
struct RunAllocator {
    deadline: Instant,
    /// The most bytes the run may hold at once.
    limit: usize,
    /// The bytes it holds now.
    held: usize,
    /// Set when an allocation was refused for the limit.
    out_of_memory: Rc<Cell<bool>>,
}

impl RunAllocator {
    /// Whether an allocation of `size` bytes, adding `more` to what the run holds, is refused.
    fn refuses(&self, size: usize, more: usize) -> bool {
        if self.held.saturating_add(more) > self.limit {
            self.out_of_memory.set(true);
            return true;
        }
        size > LATE_ALLOCATION_BYTES && Instant::now() >= self.deadline
    }

    fn taken(&mut self, ptr: *mut u8) -> *mut u8 {
        if !ptr.is_null() {
            // SAFETY: `ptr` was just allocated by `RustAllocator`.
            self.held += unsafe { RustAllocator::usable_size(ptr) };
        }
        ptr
    }
}

// SAFETY: every allocation is made, sized and freed by `RustAllocator`; this only counts them
// and refuses some.
unsafe impl Allocator for RunAllocator {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        if self.refuses(size, size) {
            return std::ptr::null_mut();
        }
        let ptr = RustAllocator.alloc(size);
        self.taken(ptr)
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        let total = count.saturating_mul(size);
        if self.refuses(total, total) {
            return std::ptr::null_mut();
        }
        let ptr = RustAllocator.calloc(count, size);
        self.taken(ptr)
    }

    unsafe fn dealloc(&mut self, ptr: *mut u8) {
        self.held -= RustAllocator::usable_size(ptr);
        RustAllocator.dealloc(ptr)
    }

    unsafe fn realloc(&mut self, ptr: *mut u8, new_size: usize) -> *mut u8 {
        let old = RustAllocator::usable_size(ptr);
        if new_size > old && self.refuses(new_size, new_size - old) {
            return std::ptr::null_mut();
        }
        let moved = RustAllocator.realloc(ptr, new_size);
        if !moved.is_null() {
            self.held = self.held - old + RustAllocator::usable_size(moved);
        }
        moved
    }

    unsafe fn usable_size(ptr: *mut u8) -> usize {
        RustAllocator::usable_size(ptr)
    }
}

fn evaluate(
    job: &Job,
    signer: &Rc<Signer>,
    captured: &Rc<RefCell<Captured>>,
    started: Instant,
) -> Result<Json, String> {
    let deadline = started + job.timeout;
    let out_of_memory = Rc::new(Cell::new(false));
    let allocator =
        RunAllocator { deadline, limit: job.memory_bytes, held: 0, out_of_memory: out_of_memory.clone() };
    let runtime =
        Runtime::new_with_alloc(allocator).map_err(|e| format!("the sandbox could not start: {e}"))?;
    runtime.set_max_stack_size(STACK_BYTES);
    runtime.set_interrupt_handler(Some(Box::new(move || Instant::now() >= deadline)));
    let context = Context::full(&runtime).map_err(|e| format!("the sandbox could not start: {e}"))?;
    let timed_out = || Instant::now() >= deadline;
    let outcome = context.with(|ctx| -> Result<Json, String> {
        let describe = |e: CaughtError<'_>| describe(e, deadline, out_of_memory.get(), job.timeout);
        install(&ctx, job, deadline, signer, captured).catch(&ctx).map_err(describe)?;
        ctx.eval::<(), _>(job.source.as_str()).catch(&ctx).map_err(describe)?;
        let handler: Value = ctx.globals().get("handler").catch(&ctx).map_err(describe)?;
        let Some(handler) = handler.as_function() else {
            return Err("the source must define a function handler(event, api)".into());
        };
        let event = ctx.json_parse(job.event.to_string()).catch(&ctx).map_err(describe)?;
        let api: Value = ctx.globals().get("__api").catch(&ctx).map_err(describe)?;
        let mut value: Value = handler.call((event, api)).catch(&ctx).map_err(describe)?;
        if let Some(promise) = value.as_promise().cloned() {
            while let rquickjs::promise::PromiseState::Pending = promise.state() {
                if timed_out() {
                    return Err(timed_out_after(job.timeout));
                }
                if !ctx.execute_pending_job() {
                    return Err("the handler's promise never settled".into());
                }
            }
            value = promise
                .result::<Value>()
                .unwrap_or(Ok(Value::new_undefined(ctx.clone())))
                .catch(&ctx)
                .map_err(describe)?;
        }
        if value.is_undefined() {
            return Ok(Json::Null);
        }
        let text = ctx.json_stringify(value).catch(&ctx).map_err(describe)?;
        let text = match text {
            Some(text) => text.to_string().map_err(|e| e.to_string())?,
            None => return Ok(Json::Null),
        };
        serde_json::from_str(&text).map_err(|e| format!("the result is not JSON: {e}"))
    });
    drop(context);
    // One operation in C can end past the deadline with no interrupt asked on the way (a long
    // BigInt parsed): the limit holds wherever the time went.
    match outcome {
        Ok(_) if timed_out() => Err(timed_out_after(job.timeout)),
        outcome => outcome,
    }
}

/// The message QuickJS puts on an error when it has no memory left for the one it meant, its
/// own `out of memory` among them: a run that met its limit there was told
/// `InternalError: Invalid error message`.
const UNWRITTEN_MESSAGE: &str = "Invalid error message";

/// A caught JavaScript error as one line; a hit deadline as a time-out, and the memory limit
/// as such, also where QuickJS could only throw `null` for it, or an error without its message,
/// or nothing at all: `String.prototype.normalize` fails without setting an error, and what is
/// caught is then the engine's "uninitialized" value, which no script can throw.
fn describe(error: CaughtError<'_>, deadline: Instant, out_of_memory: bool, timeout: Duration) -> String {
    if Instant::now() >= deadline {
        return timed_out_after(timeout);
    }
    // The memory limit first, however QuickJS could tell it; then the error as it was thrown.
    let memory = match &error {
        CaughtError::Value(v) => out_of_memory && (v.is_null() || v.type_of() == Type::Uninitialized),
        CaughtError::Exception(e) => {
            let message = e.message().unwrap_or_default();
            message.contains("out of memory") || (out_of_memory && message == UNWRITTEN_MESSAGE)
        }
        CaughtError::Error(e) => {
            let text = e.to_string();
            text.contains("out of memory") || text.contains("Allocation")
        }
    };
    if memory {
        return "the run exceeded its memory limit".into();
    }
    match error {
        CaughtError::Exception(e) if e.message().is_some_and(|m| m.contains("stack overflow")) => {
            "the run exceeded its stack limit".into()
        }
        CaughtError::Exception(e) => error_text(&e).unwrap_or_else(|_| "Error".into()),
        CaughtError::Value(v) => {
            format!(
                "a non-Error value was thrown: {}",
                value_text(&v, deadline).unwrap_or_else(|_| "[Object]".into())
            )
        }
        CaughtError::Error(e) => e.to_string(),
    }
}

/// What the script's own code (a getter, `toJSON`, `toString`) computed for a host function:
/// `Some` as it came, `None` where the script threw (the host then falls back), and the
/// deadline's interrupt passed on. No host function may swallow the interrupt: the run ends only
/// when it reaches the top, and a script whose every poll landed in a getter that it logged or
/// handed a helper ran on past its deadline for ever, its thread abandoned.
fn from_script<T>(ctx: &Ctx<'_>, computed: rquickjs::Result<T>) -> rquickjs::Result<Option<T>> {
    match computed {
        Ok(value) => Ok(Some(value)),
        Err(rquickjs::Error::Exception) => {
            let thrown = ctx.catch();
            if thrown.is_uncatchable_error() {
                Err(ctx.throw(thrown))
            } else {
                Ok(None)
            }
        }
        Err(_) => Ok(None),
    }
}

/// An error as one line, `name: message` (`TypeError: x`), as a thrown one is told.
fn error_text(e: &Exception<'_>) -> rquickjs::Result<String> {
    use rquickjs::convert::Coerced;
    let ctx = e.ctx();
    let name = from_script(ctx, e.get::<_, String>("name"))?.unwrap_or_else(|| "Error".into());
    let message = from_script(ctx, e.get::<_, Option<Coerced<String>>>("message"))?.flatten();
    Ok(format!("{name}: {}", message.map(|m| m.0).unwrap_or_default()))
}

/// A value as `console.log` and a thrown non-Error show it: a string as it is, an error as
/// `name: message` (JSON writes one as `{}`, which told a script's `catch` nothing), what JSON
/// can write as JSON ([`json_text`]), and the rest as JavaScript writes it (`undefined`, `10n`,
/// `Symbol(x)`, `[Function]`; `[Object]` for an object whose getter or `toJSON` threw). An `Err`
/// is the deadline's interrupt, passed on ([`from_script`]).
fn value_text(v: &Value<'_>, deadline: Instant) -> rquickjs::Result<String> {
    if let Some(s) = v.as_string() {
        return Ok(s.to_string().unwrap_or_default());
    }
    if let Some(e) = v.as_object().cloned().and_then(Exception::from_object) {
        return error_text(&e);
    }
    if v.is_undefined() {
        return Ok("undefined".into());
    }
    if v.is_function() {
        return Ok("[Function]".into());
    }
    if v.is_big_int() {
        return Ok(big_int_text(v));
    }
    if let Some(symbol) = v.as_symbol() {
        let description = symbol.description().ok().and_then(|d| d.as_string()?.to_string().ok());
        return Ok(format!("Symbol({})", description.unwrap_or_default()));
    }
    Ok(json_text(v, deadline)?.unwrap_or_else(|| format!("[{:?}]", v.type_of())))
}

/// A BigInt as JavaScript writes one, `10n`: its own digits, which converting runs none of the
/// script's code for.
fn big_int_text(v: &Value<'_>) -> String {
    let digits = v.get::<rquickjs::convert::Coerced<String>>().map(|c| c.0);
    digits.map_or_else(|_| "[BigInt]".into(), |d| format!("{d}n"))
}

/// A value as JSON writes it, with what JSON cannot write inside it told as a string, as
/// [`value_text`] tells it at the top: an error as `"name: message"` (JSON writes `{}`), a BigInt
/// as `"10n"` (JSON throws), and a reference back to an object that holds it as `"[Circular]"`
/// (JSON throws), so that `console.log({error, request})` in a `catch` tells what failed. `None`
/// where the script's own getter or `toJSON` threw.
///
/// The replacer keeps the objects from the top down to the one being written (JSON writes depth
/// first, and hands the replacer each value's holder), in a set as well as in order, so that
/// each value costs the same whatever its depth. A replacer call costs more than JSON's own
/// step, and JSON asks no interrupt while it writes, so the replacer asks the deadline itself:
/// past it, it throws, and the value is written `[Object]` as the run ends.
fn json_text<'js>(v: &Value<'js>, deadline: Instant) -> rquickjs::Result<Option<String>> {
    use rquickjs::function::This;
    use std::collections::HashSet;
    let ctx = v.ctx();
    let path: Rc<RefCell<(Vec<Value<'js>>, HashSet<Value<'js>>)>> = Rc::default();
    let held = path.clone();
    let replacer =
        Function::new(ctx.clone(), move |holder: This<Value<'js>>, _key: Value<'js>, value: Value<'js>| {
            let ctx = value.ctx().clone();
            if Instant::now() >= deadline {
                return Err(throw(&ctx, "the run's deadline passed"));
            }
            let text = |text: &str| rquickjs::String::from_str(ctx.clone(), text).map(|s| s.into_value());
            if value.is_big_int() {
                return text(&big_int_text(&value));
            }
            let Some(object) = value.as_object() else { return Ok(value) };
            if let Some(e) = Exception::from_object(object.clone()) {
                return text(&error_text(&e)?);
            }
            let mut path = held.borrow_mut();
            let (order, set) = &mut *path;
            while let Some(top) = order.last() {
                if *top == holder.0 {
                    break;
                }
                set.remove(top);
                order.pop();
            }
            if set.contains(&value) {
                return text("[Circular]");
            }
            order.push(value.clone());
            set.insert(value.clone());
            Ok(value)
        })?;
    let json = from_script(ctx, ctx.json_stringify_replacer(v.clone(), replacer));
    // Emptied here, not left to the replacer's drop: QuickJS's collector cannot see the values a
    // Rust closure holds, so none may stay held should the function outlive the call.
    *path.borrow_mut() = Default::default();
    Ok(json?.flatten().and_then(|s| s.to_string().ok()))
}

/// A hook's text argument (`what`): a string, or a `TypeError` that names it.
fn text_argument(ctx: &Ctx<'_>, value: Option<&Value<'_>>, what: &str) -> rquickjs::Result<String> {
    match value.and_then(Value::as_string) {
        Some(text) => text.to_string(),
        None => Err(Exception::throw_type(ctx, &format!("{what} must be a string"))),
    }
}

fn throw(ctx: &Ctx<'_>, message: &str) -> rquickjs::Error {
    Exception::throw_message(ctx, message)
}

/// Whether a helper takes `text`: at most [`MAX_HELPER_INPUT`] bytes, since what a helper does
/// with it runs in Rust, where the run's interrupt does not reach.
fn fits(text: &str) -> bool {
    text.len() <= MAX_HELPER_INPUT
}

/// `text` if a helper takes it ([`fits`]); otherwise an error naming the helper (`what`).
fn bounded(ctx: &Ctx<'_>, text: String, what: &str) -> rquickjs::Result<String> {
    match fits(&text) {
        true => Ok(text),
        false => Err(throw(ctx, &format!("{what}: at most {MAX_HELPER_INPUT} bytes"))),
    }
}

/// A helper's input: a string (UTF-8), a `Uint8Array`, or an array of byte values.
fn bytes_of<'js>(ctx: &Ctx<'js>, value: &Value<'js>, what: &str) -> rquickjs::Result<Vec<u8>> {
    if let Some(s) = value.as_string() {
        return Ok(bounded(ctx, s.to_string()?, what)?.into_bytes());
    }
    if let Some(object) = value.as_object() {
        let length = from_script(ctx, object.get::<_, f64>("length"))?.unwrap_or(-1.0);
        if length >= 0.0 && length <= MAX_HELPER_INPUT as f64 {
            let mut bytes = Vec::with_capacity(length as usize);
            for i in 0..length as usize {
                let b: f64 = object.get(i as u32)?;
                if !(0.0..=255.0).contains(&b) || b.fract() != 0.0 {
                    return Err(throw(ctx, &format!("{what}: byte {i} is not 0 to 255")));
                }
                bytes.push(b as u8);
            }
            return Ok(bytes);
        }
    }
    Err(throw(ctx, &format!("{what}: must be a string or an array of bytes")))
}

/// A JS value as JSON, for options and payloads (`what`), at most [`MAX_HELPER_INPUT`] bytes of it.
fn json_of<'js>(ctx: &Ctx<'js>, value: Value<'js>, what: &str) -> rquickjs::Result<Json> {
    if value.is_undefined() || value.is_null() {
        return Ok(Json::Null);
    }
    let text = ctx.json_stringify(value)?.map(|s| s.to_string()).transpose()?.unwrap_or_default();
    let text = bounded(ctx, text, what)?;
    serde_json::from_str(&text).map_err(|e| throw(ctx, &format!("{what}: not JSON: {e}")))
}

fn to_js<'js>(ctx: &Ctx<'js>, value: &Json) -> rquickjs::Result<Value<'js>> {
    ctx.json_parse(value.to_string())
}

fn options<'js, T: serde::de::DeserializeOwned + Default>(
    ctx: &Ctx<'js>,
    value: rquickjs::function::Opt<Value<'js>>,
    what: &str,
) -> rquickjs::Result<T> {
    match value.0 {
        None => Ok(T::default()),
        Some(v) => match json_of(ctx, v, what)? {
            Json::Null => Ok(T::default()),
            json => serde_json::from_value(json).map_err(|e| throw(ctx, &format!("{what}: {e}"))),
        },
    }
}

/// prelude.js as QuickJS bytecode, compiled on first use: loading it costs a run about a tenth
/// of parsing it.
fn prelude() -> rquickjs::Result<&'static [u8]> {
    static BYTECODE: OnceLock<Result<Vec<u8>, String>> = OnceLock::new();
    let compiled = BYTECODE.get_or_init(|| {
        let runtime = Runtime::new().map_err(|e| e.to_string())?;
        let context = Context::full(&runtime).map_err(|e| e.to_string())?;
        context
            .with(|ctx| {
                let module = Module::declare(ctx, "rp:prelude", include_str!("prelude.js"))?;
                module.write(WriteOptions::default())
            })
            .map_err(|e| e.to_string())
    });
    compiled.as_deref().map_err(|e| rquickjs::Error::Io(std::io::Error::other(format!("prelude.js: {e}"))))
}

/// The `console` methods a run has, each writing its line to the logs as `log` does. A script's
/// `console.error` in a catch must not throw for want of the method: in an `oob.start` hook the
/// throw would fail closed each start that reached the catch.
const CONSOLE_LEVELS: [&str; 5] = ["log", "info", "warn", "error", "debug"];

/// The globals: `console`, `env`, the helpers and `__api`, all frozen.
fn install<'js>(
    ctx: &Ctx<'js>,
    job: &Job,
    deadline: Instant,
    signer: &Rc<Signer>,
    captured: &Rc<RefCell<Captured>>,
) -> rquickjs::Result<()> {
    use rquickjs::function::{Opt, Rest};
    let globals = ctx.globals();

    let console = Object::new(ctx.clone())?;
    let sink = captured.clone();
    let log = Function::new(ctx.clone(), move |args: Rest<Value<'js>>| {
        let line = args.0.iter().map(|v| value_text(v, deadline)).collect::<rquickjs::Result<Vec<_>>>()?;
        sink.borrow_mut().log(line.join(" "));
        Ok::<_, rquickjs::Error>(())
    })?;
    for level in CONSOLE_LEVELS {
        console.set(level, log.clone())?;
    }
    globals.set("console", console)?;

    let env = Object::new(ctx.clone())?;
    for (name, value) in &job.env {
        env.set(name.as_str(), value.as_str())?;
    }
    globals.set("env", env)?;

    // The helpers of one byte string: its bytes (a string's UTF-8, or an array's) to text.
    for (name, helper) in
        [("sha256", helpers::sha256 as fn(&[u8]) -> String), ("base64EncodeToString", helpers::base64)]
    {
        globals.set(
            name,
            Function::new(ctx.clone(), move |ctx: Ctx<'js>, value: Value<'js>| {
                Ok::<_, rquickjs::Error>(helper(&bytes_of(&ctx, &value, name)?))
            })?,
        )?;
    }
    globals.set(
        "getHmacSHA256Signature",
        Function::new(ctx.clone(), |ctx: Ctx<'js>, key: Value<'js>, value: Value<'js>| {
            let key = bytes_of(&ctx, &key, "getHmacSHA256Signature key")?;
            Ok::<_, rquickjs::Error>(helpers::hmac_sha256(
                &key,
                &bytes_of(&ctx, &value, "getHmacSHA256Signature")?,
            ))
        })?,
    )?;
    globals.set(
        "jwtDecodeJwt",
        Function::new(ctx.clone(), |ctx: Ctx<'js>, token: String| {
            let token = bounded(&ctx, token, "jwtDecodeJwt")?;
            let decoded = helpers::decode_jwt(&token).map_err(|e| throw(&ctx, &e.0))?;
            to_js(&ctx, &decoded)
        })?,
    )?;
    globals.set(
        "jwtDecodeVerify",
        Function::new(ctx.clone(), |ctx: Ctx<'js>, token: String, opts: Opt<Value<'js>>| {
            let token = bounded(&ctx, token, "jwtDecodeVerify")?;
            let opts: helpers::VerifyOptions = options(&ctx, opts, "jwtDecodeVerify options")?;
            let decoded = helpers::decode_verify(&token, &opts).map_err(|e| throw(&ctx, &e.0))?;
            to_js(&ctx, &decoded)
        })?,
    )?;
    globals.set(
        "jwtVerify",
        Function::new(ctx.clone(), |ctx: Ctx<'js>, token: String, opts: Opt<Value<'js>>| {
            let opts: helpers::VerifyOptions = options(&ctx, opts, "jwtVerify options")?;
            // A token past the bound is one that does not verify: `false`, unread.
            Ok::<_, rquickjs::Error>(fits(&token) && helpers::decode_verify(&token, &opts).is_ok())
        })?,
    )?;
    let (issuer, signer) = (job.issuer.clone(), signer.clone());
    let signed = std::cell::Cell::new(0usize);
    globals.set(
        "jwtCreateSignedJwt",
        Function::new(ctx.clone(), move |ctx: Ctx<'js>, payload: Value<'js>, opts: Opt<Value<'js>>| {
            if signed.get() >= MAX_SIGNATURES_PER_RUN {
                let limit = format!("jwtCreateSignedJwt: at most {MAX_SIGNATURES_PER_RUN} tokens a run");
                return Err(throw(&ctx, &limit));
            }
            signed.set(signed.get() + 1);
            let payload = json_of(&ctx, payload, "jwtCreateSignedJwt payload")?;
            let opts: helpers::SignOptions = options(&ctx, opts, "jwtCreateSignedJwt options")?;
            let now = jsonwebtoken::get_current_timestamp();
            let key =
                signer.key().map_err(|e| throw(&ctx, &format!("jwtCreateSignedJwt: no signing key: {e}")))?;
            let (kid, key) = &*key;
            let input =
                helpers::signing_input(&payload, &opts, &issuer, kid, now).map_err(|e| throw(&ctx, &e.0))?;
            let signature: p256::ecdsa::Signature = key.sign(input.as_bytes());
            Ok::<_, rquickjs::Error>(helpers::signed_token(&input, &signature.to_bytes()))
        })?,
    )?;

    let api = Object::new(ctx.clone())?;
    let sink = captured.clone();
    api.set(
        "deny",
        Function::new(ctx.clone(), move |ctx: Ctx<'js>, reason: Opt<Value<'js>>| {
            // A reason left out, `undefined` or `null` is none, as JavaScript reads an argument.
            let reason = match reason.0.filter(|r| !r.is_undefined() && !r.is_null()) {
                None => "denied by a code customization".into(),
                reason => text_argument(&ctx, reason.as_ref(), "deny: the reason")?,
            };
            let reason: String = reason.chars().take(MAX_HOOK_TEXT).collect();
            sink.borrow_mut().actions.denied.get_or_insert(reason);
            Ok::<_, rquickjs::Error>(())
        })?,
    )?;
    let sink = captured.clone();
    api.set(
        "setTransactionText",
        Function::new(ctx.clone(), move |ctx: Ctx<'js>, text: Opt<Value<'js>>| {
            let text = text_argument(&ctx, text.0.as_ref(), "setTransactionText: the text")?;
            if text.chars().count() > MAX_HOOK_TEXT {
                return Err(throw(&ctx, &format!("setTransactionText: at most {MAX_HOOK_TEXT} characters")));
            }
            sink.borrow_mut().actions.transaction_text = Some(text);
            Ok(())
        })?,
    )?;
    globals.set("__api", api)?;

    // Array methods and string searches paced to the deadline, then nothing the host gave can
    // be replaced or changed by the script (prelude.js).
    run_prelude(ctx, job.memory_bytes / JS_VALUE_BYTES, SEARCH_BUDGET)
}

/// Runs prelude.js in `ctx`: arrays up to `limit` elements and searches up to `budget`
/// comparisons run natively.
fn run_prelude(ctx: &Ctx<'_>, limit: usize, budget: usize) -> rquickjs::Result<()> {
    // SAFETY: the bytes are this process's own QuickJS's compilation of prelude.js.
    let prelude = unsafe { Module::load(ctx.clone(), prelude()?) }?;
    let (prelude, evaluated) = prelude.eval()?;
    evaluated.finish::<()>()?;
    prelude.get::<_, Function>("default")?.call::<_, ()>((limit, budget))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrubbing_replaces_values_not_short_ones() {
        let env = BTreeMap::from([
            ("ISS".to_owned(), "https://risk.example".to_owned()),
            ("N".to_owned(), "1".to_owned()),
        ]);
        assert_eq!(scrub("iss=https://risk.example n=1".into(), &env), "iss=[env.ISS] n=1");
    }

    #[test]
    fn a_value_json_would_escape_is_scrubbed_from_the_result() {
        let env = BTreeMap::from([("KEY".to_owned(), "p\"a\\ss".to_owned())]);
        let result = serde_json::json!({"k": "p\"a\\ss!", "p\"a\\ss": ["x p\"a\\ss"]});
        assert_eq!(
            scrub_json(result, &env),
            serde_json::json!({"k": "[env.KEY]!", "[env.KEY]": ["x [env.KEY]"]})
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn an_abandoned_runs_thread_gets_the_least_priority() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            tx.send(current_thread().unwrap()).unwrap();
            let _ = wait.recv();
        });
        let id = rx.recv().unwrap();
        let nice = || {
            let stat = std::fs::read_to_string(format!("/proc/self/task/{id}/stat")).unwrap();
            // Field 19 is the nice value; the command name (field 2) ends with ')'.
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            after.split(' ').nth(16).unwrap().to_owned()
        };
        assert_eq!(nice(), "0");
        lower_priority(id, ABANDONED_NICE);
        assert_eq!(nice(), "19");
        drop(done);
        thread.join().unwrap();
    }

    #[test]
    fn one_tenants_runs_never_take_every_core() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert!(runs_per_tenant() >= 1, "a tenant can run at all");
        assert!(runs_per_tenant() <= (cores / 2).max(1), "{} slots on {cores} cores", runs_per_tenant());
    }

    #[test]
    fn the_log_replacer_stops_writing_at_the_deadline() {
        // JSON asks no interrupt while it writes; only the replacer's own check ends a long write.
        let runtime = rquickjs::Runtime::new().unwrap();
        let context = rquickjs::Context::full(&runtime).unwrap();
        context.with(|ctx| {
            let value: Value = ctx.eval("({a: [1, {b: 2n}]})").unwrap();
            let later = Instant::now() + Duration::from_secs(60);
            assert_eq!(json_text(&value, later).unwrap().as_deref(), Some(r#"{"a":[1,{"b":"2n"}]}"#));
            assert_eq!(json_text(&value, Instant::now()).unwrap(), None, "written past the deadline");
            assert_eq!(value_text(&value, Instant::now()).unwrap(), "[Object]");
        });
    }

    #[test]
    fn an_error_quickjs_had_no_memory_to_write_is_the_memory_limit_only_once_it_was_met() {
        let runtime = rquickjs::Runtime::new().unwrap();
        let context = rquickjs::Context::full(&runtime).unwrap();
        context.with(|ctx| {
            let later = Instant::now() + Duration::from_secs(60);
            let told = |out_of_memory: bool| {
                let thrown =
                    ctx.eval::<(), _>("throw new InternalError('Invalid error message')").catch(&ctx);
                describe(thrown.unwrap_err(), later, out_of_memory, Duration::from_millis(100))
            };
            assert_eq!(told(true), "the run exceeded its memory limit");
            assert_eq!(told(false), "InternalError: Invalid error message", "a script's own error");
        });
    }

    /// The paced string searches answer as QuickJS's own: with no budget, every search of two
    /// characters or more runs in prelude.js, and each case is asked of both.
    #[test]
    fn paced_string_searches_answer_as_the_native_ones() {
        let runtime = rquickjs::Runtime::new().unwrap();
        let context = rquickjs::Context::full(&runtime).unwrap();
        context.with(|ctx| {
            ctx.eval::<(), _>(
                "globalThis.native = {}; for (const n of ['indexOf', 'lastIndexOf', 'includes', 'split', 'replace', 'replaceAll']) native[n] = String.prototype[n];",
            )
            .unwrap();
            run_prelude(&ctx, 1_000_000_000, 0).unwrap();
            let report: String = ctx.eval(SEARCH_CASES).catch(&ctx).unwrap();
            let report: Json = serde_json::from_str(&report).unwrap();
            assert_eq!(report["mismatches"], serde_json::json!([]), "{report:#}");
            assert!(report["cases"].as_u64().unwrap() > 20_000, "{report}");
        });
    }

    /// The cases of `paced_string_searches_answer_as_the_native_ones`: each search asked of the
    /// method QuickJS had (`native`) and of the one the prelude put in its place.
    const SEARCH_CASES: &str = r#"
(() => {
  const W = String.prototype;
  const mismatches = [];
  let cases = 0;
  const name = (x) => {
    try {
      return typeof x === 'symbol' ? x.toString() : typeof x === 'function' ? 'fn' : typeof x === 'bigint' ? `${x}n` : JSON.stringify(x) ?? String(x);
    } catch {
      return typeof x;
    }
  };
  const answer = (f) => {
    const calls = [];
    globalThis.calls = calls;
    try {
      return JSON.stringify([f(), calls]);
    } catch (e) {
      return `throws ${e && e.constructor && e.constructor.name}`;
    }
  };
  // A sticky or global RegExp keeps where its last match ended: each call starts it afresh.
  const fresh = (args) => args.forEach((a) => a instanceof RegExp && (a.lastIndex = 0));
  const check = (method, self, args) => {
    cases++;
    fresh(args);
    const a = answer(() => native[method].apply(self, args));
    fresh(args);
    const b = answer(() => W[method].apply(self, args));
    if (a !== b && mismatches.length < 20) mismatches.push([method, name(self), args.map(name), a, b]);
  };
  const log = (tag, value) => (...a) => (globalThis.calls.push([tag, ...a]), value);
  const selves = ['abcabcab', '', 'aaaaab', 'ab', 'ba', '\u00e9\u00e9a\u00e9a\u00e9', '\ud800\udc00x\ud800', 12345, true,
    {toString: log('this', 'xyxyx')}, null, undefined, Symbol('s')];
  const needles = ['ab', 'bc', 'abc', 'aa', 'aab', 'b', '', 'zz', '\u00e9a', 'a\u00e9', 'xy', '\udc00x', '23', 'ue',
    undefined, null, 12, 23, true, /ab/, /ab/g, /b/y, {toString: log('needle', 'ab')}, {toString: log('needle', 'yx')},
    {[Symbol.match]: false, toString: log('needle', 'ca')}, {[Symbol.replace]: log('replace', 'R'), toString: () => 'ab'},
    {[Symbol.split]: log('split', ['S'])}, {[Symbol.match]: true, flags: 'g', [Symbol.replace]: log('all', 'A')},
    Symbol('x'), 1n];
  const positions = [undefined, 0, 1, 2, 5, -1, 3.7, NaN, Infinity, -Infinity, '2', {valueOf: log('position', 1)}, 1n, Symbol('p')];
  const limits = [undefined, 0, 1, 2, -1, 2 ** 32 + 1, NaN, '3', {valueOf: log('limit', 2)}, 1n];
  const replacements = ['X', '$$', '$&', '$`', "$'", '$1', '$<a>', '$0', '$', 'a$', '$$&', "[$&|$`|$'|$$$]", '$&$&',
    (...a) => JSON.stringify(a), () => ({toString: () => 'obj'}), () => { throw new RangeError('r'); }, 12, undefined, null];
  for (const self of selves) {
    for (const needle of needles) {
      for (const p of positions) for (const m of ['indexOf', 'lastIndexOf', 'includes']) check(m, self, [needle, p]);
      for (const l of limits) check('split', self, [needle, l]);
      for (const r of replacements) for (const m of ['replace', 'replaceAll']) check(m, self, [needle, r]);
    }
  }
  // Random strings over a small alphabet, where matches overlap and almost match.
  let seed = 7;
  const random = (n) => ((seed = (seed * 1103515245 + 12345) % 2147483648), seed % n);
  const text = (n) => {
    let s = '';
    for (let i = 0; i < n; i++) s += 'aab\u00e9'[random(4)];
    return s;
  };
  for (let i = 0; i < 3000; i++) {
    const s = text(random(14));
    const t = text(1 + random(random(3) === 0 ? 9 : 4));
    const p = random(18) - 2;
    for (const m of ['indexOf', 'lastIndexOf', 'includes']) check(m, s, [t, p]);
    check('split', s, [t, random(5) === 0 ? random(4) : undefined]);
    check('replace', s, [t, '<$&>']);
    check('replaceAll', s, [t, (m, at) => `<${at}>`]);
  }
  // Longer ones, compared a piece at a time (with no budget, of two characters).
  const long = ['ab'.repeat(50), 'a'.repeat(90) + 'b', '\u00e9'.repeat(50) + 'a' + '\u00e9'.repeat(50)];
  for (const s of long) {
    for (const t of [s.slice(0, 41), s.slice(1, 83), s.slice(-45), 'a'.repeat(40) + 'b', s, s + 'a']) {
      for (const m of ['indexOf', 'lastIndexOf', 'includes']) for (const p of [undefined, 1, 4000]) check(m, s, [t, p]);
      check('split', s, [t]);
      check('replace', s, [t, '[$`]']);
      check('replaceAll', s, [t, (m, at) => at]);
    }
  }
  const shape = (f) => [f.name, f.length, Object.getOwnPropertyDescriptor(W, f.name).enumerable];
  for (const m of ['indexOf', 'lastIndexOf', 'includes', 'split', 'replace', 'replaceAll']) {
    cases++;
    const a = JSON.stringify(shape(native[m])), b = JSON.stringify(shape(W[m]));
    if (a !== b) mismatches.push([m, 'shape', a, b]);
  }
  return JSON.stringify({cases, mismatches});
})()
"#;

    #[test]
    fn logs_are_bounded() {
        let mut c = Captured::default();
        for i in 0..(MAX_LOG_LINES + 5) {
            c.log(format!("line {i}"));
        }
        assert_eq!((c.logs.len(), c.dropped), (MAX_LOG_LINES, 5));
        let mut c = Captured::default();
        c.log("x".repeat(MAX_LOG_LINE * 3));
        assert_eq!(c.logs[0].len(), MAX_LOG_LINE);
        // All lines together: up to MAX_LOG_TOTAL characters exactly, then nothing more.
        let mut c = Captured::default();
        let full_lines = MAX_LOG_TOTAL / MAX_LOG_LINE;
        for _ in 0..full_lines {
            c.log("x".repeat(MAX_LOG_LINE));
        }
        c.log("y".repeat(MAX_LOG_TOTAL - full_lines * MAX_LOG_LINE));
        c.log("z".into());
        assert_eq!((c.logs.len(), c.log_chars, c.dropped), (full_lines + 1, MAX_LOG_TOTAL, 1));
    }
}
