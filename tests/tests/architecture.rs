//! The layering rules of docs/architecture.md that the compiler does not hold. The crates make a
//! wrong import between layers a compile error; inside a crate, Rust lets modules import each
//! other in a circle, an HTTP area reach into another, and a handler grow. These tests read the
//! sources of the library crates under `shared/` (with `syn`) and fail on:
//!
//! - a module that imports, directly or through others, a module that imports it. A name counts
//!   where it is defined: a path through a re-export (`pub use`) is followed to the module that
//!   defines the item, so a crate root that re-exports what its modules define is no circle;
//! - an HTTP area module (one that declares its routers with `routers!`, and the console) that
//!   names another area's module: what two areas share is a use case, a wire type or a helper
//!   below them;
//! - an `async fn` of rp-http (every handler is one) over 40 lines;
//! - an rp-http module that every function links (the layers every router gets, the answers to
//!   a request no route takes) reaching the endpoint table or the OpenAPI document, directly or
//!   through others: every function would then link every endpoint's code;
//! - rp-http reaching a port itself (the state's `backend`, or a capability that hands out a
//!   store, key service, queue or push): it reads and writes through the use cases;
//! - a library crate that depends on a workspace crate its layer may not see, or a domain whose
//!   dependencies (all of them, `cargo tree`) take in an AWS SDK, HTTP, Lambda, runtime,
//!   storage or OpenAPI crate.
//!
//! Test modules (`#[cfg(test)]`) are left out: they are no part of the structure.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// The library crates, by the folder of their root.
const CRATES: [&str; 8] = [
    "shared/domain/src",
    "shared/ports/src",
    "shared/repo/src",
    "shared/sandbox/src",
    "shared/adapters/src",
    "shared/app/src",
    "shared/http/src",
    "shared/src",
];

/// The longest an HTTP handler may be, its signature and closing brace included.
const MAX_HANDLER_LINES: usize = 40;

type ModPath = Vec<String>;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// A path as a file names it: absolute (it starts with `crate`, `super` or `self`), or as
/// written, in the module it stands in (a child module's, an import's, or another crate's).
#[derive(Debug, Clone)]
enum Named {
    Absolute(ModPath),
    Relative { at: ModPath, segments: Vec<String> },
}

impl Named {
    fn joined(&self, more: &[String]) -> Named {
        match self {
            Named::Absolute(path) => Named::Absolute([path.as_slice(), more].concat()),
            Named::Relative { at, segments } => {
                Named::Relative { at: at.clone(), segments: [segments.as_slice(), more].concat() }
            }
        }
    }
}

/// What one file defines, imports and names.
#[derive(Default)]
struct Module {
    /// The names its top level defines (functions, types, constants, macros, inline modules).
    defines: BTreeSet<String>,
    /// Its top level's `use` items by the name they bring in.
    imports: BTreeMap<String, Named>,
    /// Its top level's glob imports.
    globs: Vec<Named>,
    /// Every path of two or more segments it names, and every import.
    names: Vec<Named>,
}

/// A crate's files by module path (`[]` is its root).
struct Crate {
    modules: BTreeMap<ModPath, Module>,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            // `bin/` holds crates of their own.
            if path.file_name().is_some_and(|n| n != "bin") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn module_path(src: &Path, file: &Path) -> ModPath {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut path: ModPath = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(path.last().map(String::as_str), Some("lib" | "mod")) {
        path.pop();
    }
    path
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.meta.require_list().is_ok_and(|l| l.tokens.to_string().contains("test"))
    })
}

/// Reads one file, inside its inline modules with the path each adds.
struct Reader {
    file: ModPath,
    at: ModPath,
    module: Module,
}

impl Reader {
    fn named(&self, segments: &[String]) -> Named {
        let mut at = match segments.first().map(String::as_str) {
            Some("crate") => return Named::Absolute(segments[1..].to_vec()),
            Some("super" | "self") => self.at.clone(),
            _ => return Named::Relative { at: self.at.clone(), segments: segments.to_vec() },
        };
        let mut rest = segments;
        while let Some(first) = rest.first() {
            match first.as_str() {
                "super" => {
                    at.pop();
                }
                "self" => {}
                _ => break,
            }
            rest = &rest[1..];
        }
        at.extend(rest.iter().cloned());
        Named::Absolute(at)
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.import(prefix, &n.ident.to_string(), None),
            syn::UseTree::Rename(r) => self.import(prefix, &r.ident.to_string(), Some(r.rename.to_string())),
            syn::UseTree::Glob(_) => {
                let named = self.named(prefix);
                if self.at == self.file {
                    self.module.globs.push(named.clone());
                }
                self.module.names.push(named);
            }
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    fn import(&mut self, prefix: &[String], name: &str, rename: Option<String>) {
        let (segments, alias) = match name {
            "self" => (prefix.to_vec(), prefix.last().cloned().unwrap_or_default()),
            _ => ([prefix, &[name.to_owned()]].concat(), name.to_owned()),
        };
        let named = self.named(&segments);
        if self.at == self.file {
            self.module.imports.insert(rename.unwrap_or(alias), named.clone());
        }
        self.module.names.push(named);
    }
}

impl<'ast> Visit<'ast> for Reader {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let (attrs, defined) = match item {
            syn::Item::Const(i) => (&i.attrs, Some(&i.ident)),
            syn::Item::Enum(i) => (&i.attrs, Some(&i.ident)),
            syn::Item::Fn(i) => (&i.attrs, Some(&i.sig.ident)),
            syn::Item::Impl(i) => (&i.attrs, None),
            syn::Item::Macro(i) => (&i.attrs, i.ident.as_ref()),
            syn::Item::Mod(i) => (&i.attrs, Some(&i.ident)),
            syn::Item::Static(i) => (&i.attrs, Some(&i.ident)),
            syn::Item::Struct(i) => (&i.attrs, Some(&i.ident)),
            syn::Item::Trait(i) => (&i.attrs, Some(&i.ident)),
            syn::Item::Type(i) => (&i.attrs, Some(&i.ident)),
            syn::Item::Union(i) => (&i.attrs, Some(&i.ident)),
            syn::Item::Use(i) => (&i.attrs, None),
            _ => return syn::visit::visit_item(self, item),
        };
        if is_cfg_test(attrs) {
            return;
        }
        if let Some(ident) = defined.filter(|_| self.at == self.file) {
            self.module.defines.insert(ident.to_string());
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if item.content.is_some() {
            self.at.push(item.ident.to_string());
            syn::visit::visit_item_mod(self, item);
            self.at.pop();
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.segments.len() > 1 {
            let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
            let named = self.named(&segments);
            self.module.names.push(named);
        }
        syn::visit::visit_path(self, path);
    }
}

impl Crate {
    fn read(src: &str) -> Crate {
        let src = root().join(src);
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut krate = Crate { modules: BTreeMap::new() };
        for file in files {
            let path = module_path(&src, &file);
            let text = std::fs::read_to_string(&file).unwrap();
            let syntax = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let mut reader = Reader { file: path.clone(), at: path.clone(), module: Module::default() };
            reader.visit_file(&syntax);
            krate.modules.insert(path, reader.module);
        }
        krate
    }

    /// The file module that defines what `named` names; `None` for another crate's name, or a
    /// local one.
    fn resolve(&self, named: &Named, depth: usize) -> Option<ModPath> {
        if depth > 16 {
            return None;
        }
        match named {
            Named::Absolute(path) => self.locate(path, depth),
            Named::Relative { at, segments } => {
                let first = segments.first()?;
                let child = [at.as_slice(), std::slice::from_ref(first)].concat();
                if self.modules.contains_key(&child) {
                    return self.locate(&[at.as_slice(), segments].concat(), depth);
                }
                let file = self.file_of(at);
                let import = self.modules[&file].imports.get(first)?;
                self.resolve(&import.joined(&segments[1..]), depth + 1)
            }
        }
    }

    /// The file module of `path`, an inline module's or a file's own.
    fn file_of(&self, path: &[String]) -> ModPath {
        (0..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| self.modules.contains_key(p)).unwrap()
    }

    fn locate(&self, path: &[String], depth: usize) -> Option<ModPath> {
        let file = self.file_of(path);
        let Some(first) = path.get(file.len()) else {
            return Some(file);
        };
        let module = &self.modules[&file];
        let rest = &path[file.len() + 1..];
        if let Some(import) = module.imports.get(first) {
            return self.resolve(&import.joined(rest), depth + 1);
        }
        if !module.defines.contains(first) {
            for glob in &module.globs {
                let Some(source) = self.resolve(glob, depth + 1) else { continue };
                let there = &self.modules[&source];
                if there.defines.contains(first) || there.imports.contains_key(first) {
                    return self.locate(&[source.as_slice(), &path[file.len()..]].concat(), depth + 1);
                }
            }
        }
        Some(file)
    }

    /// Each file module's imports of the crate's other file modules.
    fn edges(&self) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
        let mut edges = BTreeMap::new();
        for (path, module) in &self.modules {
            let targets: BTreeSet<ModPath> = module
                .names
                .iter()
                .filter_map(|named| self.resolve(named, 0))
                .filter(|target| target != path)
                .collect();
            edges.insert(path.clone(), targets);
        }
        edges
    }
}

fn shown(path: &ModPath) -> String {
    if path.is_empty() {
        "crate".into()
    } else {
        path.join("::")
    }
}

/// The strongly connected components of more than one module (Tarjan's algorithm).
fn circles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct State<'a> {
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        found: Vec<Vec<ModPath>>,
    }
    fn visit<'a>(s: &mut State<'a>, node: &'a ModPath) {
        let n = s.index.len();
        s.index.insert(node, n);
        s.low.insert(node, n);
        s.stack.push(node);
        s.on_stack.insert(node);
        for next in &s.edges[node] {
            if !s.index.contains_key(next) {
                visit(s, next);
                let low = s.low[node].min(s.low[next]);
                s.low.insert(node, low);
            } else if s.on_stack.contains(next) {
                let low = s.low[node].min(s.index[next]);
                s.low.insert(node, low);
            }
        }
        if s.low[node] == s.index[node] {
            let mut component = Vec::new();
            while let Some(top) = s.stack.pop() {
                s.on_stack.remove(top);
                component.push(top.clone());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !state.index.contains_key(node) {
            visit(&mut state, node);
        }
    }
    state.found
}

#[test]
fn no_module_imports_one_that_imports_it() {
    let mut found = Vec::new();
    for src in CRATES {
        let krate = Crate::read(src);
        let edges = krate.edges();
        for circle in circles(&edges) {
            let ties: Vec<String> = circle
                .iter()
                .flat_map(|from| {
                    edges[from]
                        .iter()
                        .filter(|to| circle.contains(to))
                        .map(move |to| format!("{} -> {}", shown(from), shown(to)))
                })
                .collect();
            found.push(format!("{src}: {}", ties.join(", ")));
        }
    }
    assert!(
        found.is_empty(),
        "modules that import each other, directly or through others:\n{}",
        found.join("\n")
    );
}

/// The test can fail: two modules that name each other are a circle.
#[test]
fn a_circle_is_found() {
    let a = vec!["a".to_owned()];
    let b = vec!["b".to_owned()];
    let c = vec!["c".to_owned()];
    let edges = BTreeMap::from([
        (a.clone(), BTreeSet::from([b.clone()])),
        (b.clone(), BTreeSet::from([a.clone(), c.clone()])),
        (c.clone(), BTreeSet::new()),
    ]);
    assert_eq!(circles(&edges), vec![vec![a.clone(), b.clone()]]);
    let edges = BTreeMap::from([(a.clone(), BTreeSet::from([b.clone()])), (b, BTreeSet::new())]);
    assert!(circles(&edges).is_empty());
}

/// A re-export is followed to the module that defines the name; a name of the module's own, of
/// a child module or of another crate resolves as it should.
#[test]
fn names_resolve_to_the_module_that_defines_them() {
    let krate = Crate::read("shared/http/src");
    let named = |at: &[&str], segments: &[&str]| Named::Relative {
        at: at.iter().map(|s| s.to_string()).collect(),
        segments: segments.iter().map(|s| s.to_string()).collect(),
    };
    let path = |p: &[&str]| Some(p.iter().map(|s| s.to_string()).collect::<ModPath>());
    // `crate::errors::INVALID_FIELD` is problem.rs's, re-exported by errors.rs.
    let reexported = Named::Absolute(vec!["errors".into(), "INVALID_FIELD".into()]);
    assert_eq!(krate.resolve(&reexported, 0), path(&["problem"]));
    // lib.rs's `extract::BodyLimit` is the extract module's.
    assert_eq!(krate.resolve(&named(&[], &["extract", "BodyLimit"]), 0), path(&["extract"]));
    // Another crate's name resolves to none of this crate's modules.
    assert_eq!(krate.resolve(&named(&["oob"], &["rp_app", "AppState"]), 0), None);
}

/// The HTTP areas: the modules that declare their routers with `routers!`, and the console.
fn http_areas() -> BTreeSet<String> {
    let src = root().join("shared/http/src");
    let mut areas = BTreeSet::from(["console".to_owned()]);
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if path.file_name().is_some_and(|n| n != "routing.rs") && text.contains("routers! {") {
            areas.insert(path.file_stem().unwrap().to_string_lossy().into_owned());
        }
    }
    areas
}

#[test]
fn no_http_area_imports_another() {
    let areas = http_areas();
    assert!(areas.len() >= 10, "the areas were not found: {areas:?}");
    let krate = Crate::read("shared/http/src");
    let area_of = |path: &ModPath| path.first().filter(|first| areas.contains(*first)).cloned();
    let mut found = Vec::new();
    for (from, targets) in krate.edges() {
        for to in targets {
            if let (Some(a), Some(b)) = (area_of(&from), area_of(&to)) {
                if a != b {
                    found.push(format!("{} -> {}", shown(&from), shown(&to)));
                }
            }
        }
    }
    assert!(found.is_empty(), "HTTP areas that import another area:\n{}", found.join("\n"));
}

#[test]
fn no_http_handler_is_over_40_lines() {
    let mut files = Vec::new();
    rust_files(&root().join("shared/http/src"), &mut files);
    let top_level_async_fn = regex::Regex::new(r"^(pub(\([a-z]+\))? )?async fn (\w+)").unwrap();
    let mut found = Vec::new();
    let mut handlers = 0;
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (start, line) in lines.iter().enumerate() {
            let Some(name) = top_level_async_fn.captures(line).map(|c| c[3].to_owned()) else { continue };
            handlers += 1;
            let end = (start..lines.len()).find(|&i| lines[i] == "}").unwrap();
            let length = end - start + 1;
            if length > MAX_HANDLER_LINES {
                found.push(format!("{}:{}: {name} is {length} lines", file.display(), start + 1));
            }
        }
    }
    assert!(handlers > 50, "the handlers were not found ({handlers})");
    assert!(found.is_empty(), "handlers over {MAX_HANDLER_LINES} lines:\n{}", found.join("\n"));
}

/// The modules of rp-http that every function links, whatever its endpoint: the layers every
/// router gets, and the answers to a request no route takes.
const LINKED_BY_EVERY_FUNCTION: [&str; 3] = ["layers", "no_route", "routes"];

/// What those may not reach: the table of every endpoint's router, and the OpenAPI document
/// built from every wire type.
const EVERY_ENDPOINT: [&str; 2] = ["endpoints", "openapi"];

/// Every module `from` imports, directly or through others.
fn reached(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>, from: &ModPath) -> BTreeSet<ModPath> {
    let mut seen = BTreeSet::new();
    let mut next: Vec<&ModPath> = edges[from].iter().collect();
    while let Some(module) = next.pop() {
        if seen.insert(module.clone()) {
            next.extend(&edges[module]);
        }
    }
    seen
}

#[test]
fn what_every_function_links_reaches_no_other_endpoints_code() {
    let edges = Crate::read("shared/http/src").edges();
    let mut found = Vec::new();
    for module in LINKED_BY_EVERY_FUNCTION {
        let from = vec![module.to_owned()];
        assert!(edges.contains_key(&from), "rp-http has a module {module}");
        let reached = reached(&edges, &from);
        for all in EVERY_ENDPOINT.into_iter().filter(|all| reached.contains(&vec![all.to_string()])) {
            found.push(format!("{module} -> {all}"));
        }
    }
    assert!(
        found.is_empty(),
        "modules every function links that reach every endpoint's code:\n{}",
        found.join("\n")
    );
}

/// The test can fail: a module imported through another is reached.
#[test]
fn a_module_reached_through_others_is_found() {
    let [a, b, c, d] = ["a", "b", "c", "d"].map(|m| vec![m.to_owned()]);
    let edges = BTreeMap::from([
        (a.clone(), BTreeSet::from([b.clone()])),
        (b.clone(), BTreeSet::from([a.clone(), c.clone()])),
        (c.clone(), BTreeSet::new()),
        (d.clone(), BTreeSet::from([a.clone()])),
    ]);
    assert_eq!(reached(&edges, &a), BTreeSet::from([a.clone(), b, c.clone()]));
    assert!(reached(&edges, &c).is_empty());
    assert!(!reached(&edges, &a).contains(&d));
}

/// The capabilities that hand out a port: rp-http takes none of them.
const PORT_CAPABILITIES: [&str; 4] = ["HasStore", "HasKeys", "HasQueue", "HasPush"];

/// Where a source reaches a port past the use cases: the `backend` field of the state, or a
/// capability that hands out a port. Test modules are left out.
#[derive(Default)]
struct PortReach {
    found: Vec<String>,
}

impl<'a> Visit<'a> for PortReach {
    fn visit_item_mod(&mut self, module: &'a syn::ItemMod) {
        if !is_cfg_test(&module.attrs) {
            syn::visit::visit_item_mod(self, module);
        }
    }
    fn visit_item_fn(&mut self, function: &'a syn::ItemFn) {
        if !is_cfg_test(&function.attrs) {
            syn::visit::visit_item_fn(self, function);
        }
    }
    fn visit_member(&mut self, member: &'a syn::Member) {
        if matches!(member, syn::Member::Named(name) if name == "backend") {
            self.found.push("the state's `backend`".into());
        }
    }
    fn visit_ident(&mut self, ident: &'a syn::Ident) {
        if PORT_CAPABILITIES.iter().any(|c| ident == c) {
            self.found.push(format!("`{ident}`"));
        }
    }
}

fn port_reach(source: &str) -> Vec<String> {
    let mut reach = PortReach::default();
    reach.visit_file(&syn::parse_file(source).unwrap());
    reach.found
}

/// rp-http reads and writes only through the use cases of rp-app: no handler, extractor or
/// middleware builds a repository or calls a port itself (it has no way to reach one: the
/// state's ports and the capabilities that hand them out are the use cases').
#[test]
fn http_reaches_the_ports_only_through_use_cases() {
    let mut files = Vec::new();
    rust_files(&root().join("shared/http/src"), &mut files);
    assert!(files.len() > 20, "the sources were not found");
    let mut found = Vec::new();
    for file in files {
        for reach in port_reach(&std::fs::read_to_string(&file).unwrap()) {
            found.push(format!("{}: {reach}", file.display()));
        }
    }
    assert!(found.is_empty(), "rp-http reaching a port past the use cases:\n{}", found.join("\n"));
}

/// The test can fail: a handler that takes the store from the state, or the capability, is found;
/// a test module may.
#[test]
fn a_port_reached_past_the_use_cases_is_found() {
    let handler = "async fn h(state: AppState) { Devices::new(state.backend.store.as_ref()); }";
    assert_eq!(port_reach(handler), ["the state's `backend`"]);
    let capability = "use rp_app::HasStore;\nfn h(s: &AppState) { Apps::new(s.store()); }";
    assert_eq!(port_reach(capability), ["`HasStore`"]);
    assert!(port_reach("#[cfg(test)]\nmod tests { fn f(s: AppState) { s.backend.clock; } }").is_empty());
    assert!(port_reach("fn f(state: &AppState) { state.clock().now_millis(); }").is_empty());
}

/// The workspace crates each library crate may depend on (its direct, normal dependencies).
const LAYERS: [(&str, &[&str]); 7] = [
    ("rp-domain", &[]),
    ("rp-ports", &["rp-domain"]),
    ("rp-repo", &["rp-domain", "rp-ports"]),
    ("rp-sandbox", &["rp-domain", "rp-ports"]),
    ("rp-adapters", &["rp-domain", "rp-ports"]),
    ("rp-app", &["rp-domain", "rp-ports", "rp-repo", "rp-sandbox"]),
    ("rp-http", &["rp-domain", "rp-ports", "rp-repo", "rp-sandbox", "rp-app"]),
];

/// The names of the packages `cargo tree` lists for `package` (normal dependencies, this
/// platform's), `depth` levels down (all of them with `None`); `package` itself included.
fn tree(package: &str, depth: Option<usize>) -> BTreeSet<String> {
    let mut command = std::process::Command::new(env!("CARGO"));
    command.current_dir(root()).args([
        "tree",
        "--offline",
        "-p",
        package,
        "-e",
        "normal",
        "--prefix",
        "none",
    ]);
    command.args(["--format", "{p}"]);
    if let Some(depth) = depth {
        command.args(["--depth", &depth.to_string()]);
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "cargo tree -p {package}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines().filter_map(|line| line.split_whitespace().next()).map(str::to_owned).collect()
}

#[test]
fn each_crate_depends_only_on_the_layers_below_it() {
    let mut found = Vec::new();
    for (package, allowed) in LAYERS {
        let workspace: BTreeSet<String> =
            tree(package, Some(1)).into_iter().filter(|d| d.starts_with("rp-")).collect();
        assert!(workspace.contains(package), "cargo tree did not list {package}");
        for dependency in workspace.iter().filter(|d| *d != package && !allowed.contains(&d.as_str())) {
            found.push(format!("{package} depends on {dependency}"));
        }
    }
    assert!(found.is_empty(), "dependencies across the layers:\n{}", found.join("\n"));
}

#[test]
fn the_domain_takes_in_no_sdk_http_runtime_storage_or_schema_crate() {
    let forbidden = |name: &str| {
        [
            "aws-sdk-",
            "aws-config",
            "aws-smithy-",
            "aws-types",
            "axum",
            "hyper",
            "tower",
            "lambda_",
            "tokio",
            "redb",
            "utoipa",
        ]
        .iter()
        .any(|prefix| name.starts_with(prefix))
            || (name.starts_with("rp-") && name != "rp-domain")
    };
    let all = tree("rp-domain", None);
    assert!(all.contains("serde"), "cargo tree did not list the domain's dependencies: {all:?}");
    let found: Vec<&String> = all.iter().filter(|name| forbidden(name)).collect();
    assert!(found.is_empty(), "rp-domain takes in {found:?}");
}
