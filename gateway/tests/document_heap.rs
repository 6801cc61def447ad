//! The document cache's weigher against the allocator: the estimate of a parsed
//! document's heap must cover what parsing really allocates, and not wildly exceed it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Counts the bytes live per thread: what the test's own thread allocates, whatever the
/// test harness's other threads do meanwhile (a global count failed once on a busy CI
/// machine, 684 bytes over the estimate).
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

fn add(delta: isize) {
    // `try_with`: a thread's last frees can come after its thread-locals are gone.
    let _ = LIVE.try_with(|live| live.set(live.get() + delta));
}

fn live() -> isize {
    LIVE.with(Cell::get)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        add(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        add(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        add(new as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn documents() -> Vec<String> {
    let wide: String = (0..300)
        .map(|i| format!("a{i}: getPost(pid: \"p{i}\") {{ pid title }} "))
        .collect();
    vec![
        "{ me { id } }".to_string(),
        "query { me { id name nickname: name topPosts(count: 2) { pid author { id } } } topPosts(count: 2) { pid } }".to_string(),
        format!("{{ {wide} }}"),
        "query A($c: Int = 2, $s: Boolean!) { topPosts(count: $c) @skip(if: $s) { ...P } } \
         query B { me { ... on User { name } } } fragment P on Post { pid author { name } }"
            .to_string(),
        r#"{ x: getPost(pid: "a very long literal that a client inlined into its query text") { pid } }"#.to_string(),
    ]
}

#[test]
fn the_weigher_tracks_what_parsing_allocates() {
    for text in documents() {
        let before = live();
        let doc = async_graphql_parser::parse_query(&text).unwrap();
        let allocated = (live() - before) as usize;
        let estimate = gateway::documents::heap_size(&doc);
        // The estimate adds malloc's chunk overhead, so it sits above the bytes
        // requested, but within a small factor of them.
        assert!(
            estimate >= allocated,
            "{text:.40}: estimate {estimate} < allocated {allocated}"
        );
        assert!(
            estimate <= allocated * 2 + 256,
            "{text:.40}: estimate {estimate} >> allocated {allocated}"
        );
        drop(doc);
    }
}
