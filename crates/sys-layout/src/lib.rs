//! The committed bindings of a `-sys` crate (bindgen output kept in the repository, so a build
//! does not compile bindgen and libclang's bindings) checked against the system headers on
//! every build: [`c_assertions`] turns the bindings' own layout tests and constants into C11
//! `_Static_assert`s, which the build script compiles with the same headers and flags as the
//! crate's C shim. A header that no longer matches fails the build, naming the type, field or
//! constant.

use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// A C file in `out_dir` that includes the crate's `wrapper.h`: preprocess it (`cc`'s
/// `expand`) with the shim's flags and give the result to [`write_check`].
pub fn wrapper_unit(out_dir: &Path) -> PathBuf {
    let unit = out_dir.join("wrapper_tu.c");
    std::fs::write(&unit, "#include \"wrapper.h\"\n").expect("write wrapper_tu.c");
    unit
}

/// The build script's part: names every header the preprocessed `wrapper.h` read as
/// `rerun-if-changed`, writes `layout_check.c` (the assertions over `bindings`) to `out_dir`
/// and returns it, to compile beside the shim.
pub fn write_check(preprocessed: &[u8], bindings: &Path, out_dir: &Path) -> PathBuf {
    let unit = String::from_utf8_lossy(preprocessed);
    for header in included_files(&unit) {
        println!("cargo:rerun-if-changed={header}");
    }
    let text = std::fs::read_to_string(bindings).unwrap_or_else(|e| {
        panic!(
            "read {} (scripts/bindings.sh makes it): {e}",
            bindings.display()
        )
    });
    let check = out_dir.join("layout_check.c");
    let c = format!("#include \"wrapper.h\"\n{}", c_assertions(&text, &unit));
    std::fs::write(&check, c).expect("write layout_check.c");
    check
}

/// One fact bindgen recorded about the C side.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Fact {
    Size {
        ty: String,
        bytes: u64,
    },
    Align {
        ty: String,
        bytes: u64,
    },
    Offset {
        ty: String,
        field: String,
        bytes: u64,
    },
    Const {
        name: String,
        value: i128,
    },
}

/// The C source of static assertions for `bindings` (bindgen output with layout tests).
/// `tags` is the preprocessed C translation unit the bindings came from: a type is named
/// `struct T` or `union T` when that tag occurs in it, else by its typedef name `T`. Types and
/// fields bindgen invented (`__bindgen_*`, `_bitfield_*`, anonymous members) are skipped.
pub fn c_assertions(bindings: &str, tags: &str) -> String {
    let structs = declared(bindings, "pub struct ");
    let unions = declared(bindings, "pub union ");
    let tagged = tags_in(tags);
    let name = |ty: &str| -> Option<String> {
        if invented(ty) {
            return None;
        }
        let kind = if structs.contains(ty) {
            "struct"
        } else if unions.contains(ty) {
            "union"
        } else {
            return None;
        };
        Some(if tagged.contains(&format!("{kind} {ty}")) {
            format!("{kind} {ty}")
        } else {
            ty.to_string()
        })
    };
    let mut c = String::from("#include <stddef.h>\n");
    for fact in facts(bindings) {
        let line = match fact {
            Fact::Size { ty, bytes } => name(&ty)
                .map(|t| format!("_Static_assert(sizeof({t}) == {bytes}, \"size of {t}\");")),
            Fact::Align { ty, bytes } => name(&ty).map(|t| {
                format!("_Static_assert(_Alignof({t}) == {bytes}, \"alignment of {t}\");")
            }),
            Fact::Offset { ty, field, bytes } if !invented(&field) => name(&ty).map(|t| {
                let f = c_field(&field);
                format!("_Static_assert(offsetof({t}, {f}) == {bytes}, \"offset of {t}.{f}\");")
            }),
            Fact::Offset { .. } => None,
            Fact::Const { name, value } => {
                let suffix = if value < 0 { "LL" } else { "ULL" };
                Some(format!(
                    "_Static_assert(({name}) == {value}{suffix}, \"value of {name}\");"
                ))
            }
        };
        if let Some(line) = line {
            let _ = writeln!(c, "{line}");
        }
    }
    c
}

/// The header files a preprocessed C translation unit read (its `# LINE "FILE"` markers), for
/// `cargo:rerun-if-changed`: the check runs again when a system header changes (a package
/// upgrade), as bindgen's own callbacks made it do.
pub fn included_files(preprocessed: &str) -> BTreeSet<String> {
    preprocessed
        .lines()
        .filter_map(|l| l.strip_prefix("# "))
        .filter_map(|l| l.split_once(" \""))
        .filter_map(|(line, rest)| {
            line.bytes().all(|b| b.is_ascii_digit()).then_some(rest)?;
            rest.split_once('"').map(|(file, _)| file)
        })
        .filter(|f| f.starts_with('/') && f.ends_with(".h"))
        .map(str::to_string)
        .collect()
}

/// Names bindgen made up, with no C counterpart.
fn invented(name: &str) -> bool {
    name.contains("bindgen") || name.starts_with('_') || name.contains('<')
}

/// A field's C name: bindgen appends `_` to a Rust keyword (`type` becomes `type_`).
fn c_field(field: &str) -> &str {
    const KEYWORDS: [&str; 8] = ["type", "fn", "match", "ref", "move", "mod", "loop", "in"];
    match field.strip_suffix('_') {
        Some(base) if KEYWORDS.contains(&base) => base,
        _ => field,
    }
}

/// Type names after `prefix` at the start of a line (`pub struct T {`).
fn declared(bindings: &str, prefix: &str) -> BTreeSet<String> {
    bindings
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(|rest| {
            rest.split([' ', '{', '<', '('])
                .next()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

/// Every `struct T` and `union T` occurring in C source.
fn tags_in(c: &str) -> BTreeSet<String> {
    let words: Vec<&str> = c
        .split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .filter(|w| w[0] == "struct" || w[0] == "union")
        .map(|w| format!("{} {}", w[0], w[1]))
        .collect()
}

/// The layout tests (`["Size of T"][... - 72usize]`) and integer constants
/// (`pub const N: u32 = 4096;`) of bindgen output, in order.
fn facts(bindings: &str) -> Vec<Fact> {
    let mut out = Vec::new();
    let mut rest = bindings;
    while let Some(at) = rest.find("[\"") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find("\"]") else { break };
        let label = &rest[..end];
        rest = &rest[end + 2..];
        let Some(close) = rest.find("];") else { break };
        let expr = &rest[..close];
        rest = &rest[close..];
        let Some(bytes) = expr
            .rsplit('-')
            .next()
            .and_then(|n| n.trim().strip_suffix("usize"))
            .and_then(|n| n.parse().ok())
        else {
            continue;
        };
        if let Some(ty) = label.strip_prefix("Size of ") {
            out.push(Fact::Size {
                ty: ty.into(),
                bytes,
            });
        } else if let Some(ty) = label.strip_prefix("Alignment of ") {
            out.push(Fact::Align {
                ty: ty.into(),
                bytes,
            });
        } else if let Some((ty, field)) = label
            .strip_prefix("Offset of field: ")
            .and_then(|f| f.split_once("::"))
        {
            out.push(Fact::Offset {
                ty: ty.into(),
                field: field.into(),
                bytes,
            });
        }
    }
    for line in bindings.lines() {
        let Some(decl) = line.strip_prefix("pub const ") else {
            continue;
        };
        let Some((name, rest)) = decl.split_once(':') else {
            continue;
        };
        let Some((_, value)) = rest.split_once('=') else {
            continue;
        };
        if let Ok(value) = value.trim().trim_end_matches(';').parse::<i128>() {
            out.push(Fact::Const {
                name: name.trim().into(),
                value,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BINDINGS: &str = r#"
pub const RTE_MAX_LCORE: u32 = 128;
pub const SOCKET_ID_ANY: i32 = -1;
pub const NAME: &[u8; 4] = b"abc\0";
#[repr(C)]
pub struct rte_thing {
    pub type_: u32,
    pub __bindgen_anon_1: rte_thing__bindgen_ty_1,
}
pub union rte_thing__bindgen_ty_1 { pub a: u32 }
pub struct DAT_ANON { pub x: u64 }
const _: () = {
    ["Size of rte_thing"][::std::mem::size_of::<rte_thing>() - 8usize];
    ["Alignment of rte_thing"][::std::mem::align_of::<rte_thing>() - 4usize];
    ["Offset of field: rte_thing::type_"]
        [::std::mem::offset_of!(rte_thing, type_) - 0usize];
    ["Offset of field: rte_thing::__bindgen_anon_1"][::std::mem::offset_of!(rte_thing, __bindgen_anon_1) - 4usize];
    ["Size of rte_thing__bindgen_ty_1"][::std::mem::size_of::<rte_thing__bindgen_ty_1>() - 4usize];
    ["Size of DAT_ANON"][::std::mem::size_of::<DAT_ANON>() - 8usize];
};
"#;

    #[test]
    fn the_headers_a_translation_unit_read_are_named_once() {
        let unit = "# 1 \"/tmp/x/wrapper_tu.c\"\n# 1 \"<built-in>\"\n\
                    # 1 \"/usr/include/dpdk/rte_eal.h\" 1\nint a;\n\
                    # 12 \"/usr/include/stdio.h\" 3 4\n\
                    # 40 \"/usr/include/dpdk/rte_eal.h\" 2\n#pragma once\n";
        let files: Vec<String> = included_files(unit).into_iter().collect();
        assert_eq!(
            files,
            ["/usr/include/dpdk/rte_eal.h", "/usr/include/stdio.h"]
        );
    }

    #[test]
    fn layout_tests_and_constants_become_static_assertions() {
        let c = c_assertions(
            BINDINGS,
            "struct rte_thing { unsigned type; }; typedef struct { long x; } DAT_ANON;",
        );
        let lines: Vec<&str> = c.lines().collect();
        assert_eq!(
            lines,
            [
                "#include <stddef.h>",
                "_Static_assert(sizeof(struct rte_thing) == 8, \"size of struct rte_thing\");",
                "_Static_assert(_Alignof(struct rte_thing) == 4, \"alignment of struct rte_thing\");",
                "_Static_assert(offsetof(struct rte_thing, type) == 0, \"offset of struct rte_thing.type\");",
                "_Static_assert(sizeof(DAT_ANON) == 8, \"size of DAT_ANON\");",
                "_Static_assert((RTE_MAX_LCORE) == 128ULL, \"value of RTE_MAX_LCORE\");",
                "_Static_assert((SOCKET_ID_ANY) == -1LL, \"value of SOCKET_ID_ANY\");",
            ]
        );
    }
}
