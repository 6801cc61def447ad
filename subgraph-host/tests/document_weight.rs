//! The document cache's weigher against the allocator: for documents of every shape
//! the gateway sends (and some it does not), `documents::heap` must come within 5%
//! below and 50% above the bytes that parsing really allocated and kept.
//! One test in this file, so that the global counter sees only its allocations.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn documents() -> Vec<(&'static str, String)> {
    let aliases: String = (0..1000).map(|i| format!("a{i}: pid ")).collect();
    let nested = format!("{{ {} id {} }}", "a { ".repeat(30), " }".repeat(30));
    vec![
        ("users me", "{me{id name nickname:name __typename _gw_k_id:id}}".into()),
        ("posts topPosts", "{topPosts(count:2){pid __typename _gw_k_pid:pid}}".into()),
        ("posts _entities", "query($r0:[_Any!]!){e0:_entities(representations:$r0){...on User{topPosts(count:2){pid author{id __typename _gw_k_id:id} __typename _gw_k_pid:pid} __typename _gw_k_id:id}}}".into()),
        ("short", "{a}".into()),
        ("1000 aliases", format!("{{ topPosts(count: 2) {{ {aliases} }} }}")),
        ("nested 30", nested),
        ("fragments", "query Q($c: Int = 2, $s: Boolean!) { ...F topPosts(count: $c) @skip(if: $s) { ...G } } fragment F on Query { getPost(pid: \"p1\") { ...G } } fragment G on Post { pid title content author { id } }".into()),
        ("strings", format!("{{ getPost(pid: \"{}\") {{ pid }} }}", "x".repeat(5000))),
        ("mutation", "mutation { updatePostTitle(pid: \"p1\", title: \"a new title\") { pid title } }".into()),
    ]
}

#[test]
fn the_weight_covers_the_text_and_the_parsed_document() {
    for (name, text) in documents() {
        let before = LIVE.load(Ordering::Relaxed);
        let doc = async_graphql::parser::parse_query(&text).expect(name);
        let real = LIVE.load(Ordering::Relaxed) - before;
        let estimate = subgraph_host::documents::heap(&doc);
        println!(
            "{name}: text {} B, parsed {real} B, estimated {estimate} B",
            text.len()
        );
        drop(doc);
        assert!(
            estimate as isize >= real * 95 / 100,
            "{name}: {estimate} < {real}"
        );
        assert!(
            estimate as isize <= real * 3 / 2,
            "{name}: {estimate} > 1.5 x {real}"
        );
    }
}
