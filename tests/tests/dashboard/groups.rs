//! The dashboard's groups page over real HTTP and a real Redis: each group with its
//! counts, pause and limits; paging by cursor reaches every group once; pause and
//! resume as audited operator actions, refused to a viewer; a group id full of HTML and
//! URL characters shown escaped, with buttons that still work; the overview's mark.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::request::Parts;
use axum::Router;
use queue_core::{
    group::GroupInfo, group::GroupLimits, Dep, Job, JobError, JobOptions, Processor, QueueApp,
};
use queue_dashboard::{Access, Dashboard};

use crate::audit::audit_log;
use crate::support::text;
use queue_tests::http::{listener, request, HttpResponse};
use queue_tests::{wait_until, TestRedis, SOON};
use tokio::sync::Semaphore;

/// The test's policy: the `x-role` header says who this is.
fn policy(request: &Parts) -> Access {
    match request.headers.get("x-role").and_then(|v| v.to_str().ok()) {
        Some("operator") => Access::operator("olga"),
        Some("viewer") => Access::read_only("victor"),
        _ => Access::forbidden(),
    }
}

async fn serve(app: &QueueApp) -> SocketAddr {
    let (listener, addr) = listener().await;
    let router: Router = Router::new().merge(Dashboard::new(app, policy).mount("/admin/queues"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    addr
}

async fn get(addr: SocketAddr, path: &str, role: &str) -> HttpResponse {
    request(addr, "GET", path, &[("x-role", role)], b"")
        .await
        .expect("request")
}

/// A POST of `form` as the dashboard's own page sends it.
async fn post(addr: SocketAddr, path: &str, role: &str, form: &str) -> HttpResponse {
    request(
        addr,
        "POST",
        path,
        &[
            ("x-role", role),
            ("sec-fetch-site", "same-origin"),
            ("content-type", "application/x-www-form-urlencoded"),
        ],
        form.as_bytes(),
    )
    .await
    .expect("request")
}

/// What the handler waits on: jobs hold their group's slot until it closes.
struct Gate(Semaphore);

async fn hold(_job: Job<serde_json::Value>, gate: Dep<Gate>) -> Result<(), JobError> {
    // Closed at the end of the test: every job then finishes.
    let _ = gate.0.acquire().await;
    Ok(())
}

/// An app whose queue `queue` is worked by grouped workers (one job per group at
/// once) that hold every job until the gate closes.
async fn grouped_app(redis: &TestRedis, queue: &str, gate: Arc<Gate>) -> QueueApp {
    redis
        .app(|b| {
            b.provide_arc(gate).processor(
                Processor::new(queue)
                    .concurrency(4)
                    .groups(GroupLimits::new().concurrency(1))
                    .job("hold", hold),
            )
        })
        .await
}

async fn groups_of(app: &QueueApp, queue: &str) -> Vec<GroupInfo> {
    let q = app.queue::<serde_json::Value>(queue).expect("queue");
    q.groups(None, queue_core::group::MAX_GROUP_PAGE)
        .await
        .expect("groups")
        .groups
}

async fn group(app: &QueueApp, queue: &str, id: &str) -> GroupInfo {
    groups_of(app, queue)
        .await
        .into_iter()
        .find(|g| g.id == id)
        .unwrap_or_else(|| panic!("no group {id:?}"))
}

/// The rows of a page's table, each as the text of its cells (tags stripped, the
/// HTML left escaped).
fn rows(page: &str) -> Vec<Vec<String>> {
    let Some(start) = page.find("<tbody>") else {
        return Vec::new();
    };
    let end = page[start..]
        .find("</tbody>")
        .map_or(page.len(), |e| start + e);
    page[start..end]
        .split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let cell = cell.split("</td>").next().unwrap_or_default();
                    let mut out = String::new();
                    let mut in_tag = true; // the rest of `<td ...>`
                    for c in cell.chars() {
                        match c {
                            '<' => in_tag = true,
                            '>' => in_tag = false,
                            c if !in_tag => out.push(c),
                            _ => {}
                        }
                    }
                    out.trim().to_owned()
                })
                .collect()
        })
        .collect()
}

/// The row whose first cell is `first` (as the page writes it, escaped).
fn row_of(page: &str, first: &str) -> Vec<String> {
    rows(page)
        .into_iter()
        .find(|cells| cells.first().map(String::as_str) == Some(first))
        .unwrap_or_else(|| panic!("no row {first:?} in {page}"))
}

/// What maud escapes, read back.
fn unescape(html: &str) -> String {
    html.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// `value` for a URL query or a form body: unreserved characters kept.
fn form_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The first form on `page` that posts to an address ending in `action`: its address
/// and its hidden fields as a form body, as a browser would send them.
fn form(page: &str, action: &str) -> (String, String) {
    let needle = format!("{action}\">");
    let at = page
        .find(&needle)
        .unwrap_or_else(|| panic!("no form to {action} in {page}"));
    let open = page[..at].rfind("action=\"").expect("form action") + "action=\"".len();
    let to = unescape(&page[open..at + action.len()]);
    let body = &page[at..at + page[at..].find("</form>").expect("form end")];
    let mut fields = Vec::new();
    for input in body.split("<input ").skip(1) {
        let attr = |name: &str| {
            let start = input.find(&format!("{name}=\""))? + name.len() + 2;
            let len = input[start..].find('"')?;
            Some(unescape(&input[start..start + len]))
        };
        if let (Some(name), Some(value)) = (attr("name"), attr("value")) {
            fields.push(format!("{}={}", form_encode(&name), form_encode(&value)));
        }
    }
    (to, fields.join("&"))
}

#[tokio::test]
async fn the_page_lists_each_group_with_its_counts_pause_and_own_limits() {
    let redis = TestRedis::new("dash-groups-list");
    let gate = Arc::new(Gate(Semaphore::new(0)));
    let app = grouped_app(&redis, "dg-list", gate.clone()).await;
    let q = app.queue::<serde_json::Value>("dg-list").unwrap();
    q.pause_group("held").await.unwrap();
    q.set_group_limits(
        "limited",
        GroupLimits::new()
            .concurrency(2)
            .rate(10, Duration::from_secs(1)),
    )
    .await
    .unwrap();
    for (n, group) in ["busy", "busy", "busy", "held", "held", ""]
        .into_iter()
        .enumerate()
    {
        let options = JobOptions::new().job_id(format!("j-{n}"));
        let options = if group.is_empty() {
            options
        } else {
            options.group(group)
        };
        q.add("hold", serde_json::json!({}), options).await.unwrap();
    }
    let workers = app.start_workers().await.unwrap();
    // One of each group's jobs runs (its limit), the rest wait; the paused group waits.
    wait_until(SOON, "the groups to settle", || async {
        let groups = groups_of(&app, "dg-list").await;
        let is = |id: &str, waiting, active| {
            groups
                .iter()
                .any(|g| g.id == id && g.waiting == waiting && g.active == active)
        };
        (is("busy", 2, 1) && is("held", 2, 0) && is("", 0, 1)).then_some(())
    })
    .await;
    let addr = serve(&app).await;

    let page = text(&get(addr, "/admin/queues/dg-list/groups", "viewer").await);
    let ids: Vec<String> = rows(&page).into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(ids, ["(no group)", "busy", "held", "limited"], "by id");
    // group, waiting, active, paused, concurrency, rate, actions
    assert_eq!(
        row_of(&page, "busy"),
        ["busy", "2", "1", "", "queue's", "queue's", ""]
    );
    assert_eq!(
        row_of(&page, "held"),
        ["held", "2", "0", "paused", "queue's", "queue's", ""]
    );
    assert_eq!(
        row_of(&page, "limited"),
        ["limited", "0", "0", "", "2 at once", "10 per 1.0 s", ""]
    );
    assert_eq!(row_of(&page, "(no group)")[1..3], ["0", "1"]);
    // A viewer gets no buttons; an operator gets them, except for the jobs without a
    // group, which are no group to pause.
    assert!(!page.contains("method=\"post\""), "{page}");
    let as_operator = text(&get(addr, "/admin/queues/dg-list/groups", "operator").await);
    assert_eq!(as_operator.matches("/groups/pause\"").count(), 2);
    assert_eq!(as_operator.matches("/groups/resume\"").count(), 1);
    assert!(as_operator.contains("name=\"group\" value=\"held\""));
    assert!(!as_operator.contains("name=\"group\" value=\"\""));
    // The queue page leads here.
    let queue_page = text(&get(addr, "/admin/queues/dg-list", "viewer").await);
    assert!(
        queue_page.contains("href=\"/admin/queues/dg-list/groups\""),
        "{queue_page}"
    );

    gate.0.close();
    assert!(workers.shutdown(SOON).await.is_clean());
}

#[tokio::test]
async fn paging_by_cursor_reaches_every_group_exactly_once() {
    let redis = TestRedis::new("dash-groups-pages");
    let gate = Arc::new(Gate(Semaphore::new(0)));
    let app = grouped_app(&redis, "dg-pages", gate).await;
    let q = app.queue::<serde_json::Value>("dg-pages").unwrap();
    let mut made: Vec<String> = (0..117).map(|n| format!("t-{n:03}")).collect();
    // Ids a cursor must carry through a query string intact.
    made.extend(["t-050&after=t-100", "t-050 #x", "t-050/..", "t-050%2F"].map(String::from));
    for id in &made {
        q.set_group_limits(id, GroupLimits::new().concurrency(2))
            .await
            .unwrap();
    }
    let addr = serve(&app).await;
    for (first, per_page) in [
        ("/admin/queues/dg-pages/groups".to_owned(), 50),
        ("/admin/queues/dg-pages/groups?count=7".to_owned(), 7),
    ] {
        let mut seen = Vec::new();
        let mut pages = 0;
        let mut path = Some(first);
        while let Some(at) = path.take() {
            let page = get(addr, &at, "viewer").await;
            assert_eq!(page.status, 200, "{at}");
            let page = text(&page);
            let ids: Vec<String> = rows(&page).into_iter().map(|r| unescape(&r[0])).collect();
            assert!(ids.len() <= per_page, "{at}: {} groups", ids.len());
            seen.extend(ids);
            pages += 1;
            path = page
                .split("rel=\"next\" href=\"")
                .nth(1)
                .map(|rest| unescape(rest.split('"').next().expect("the link's end")));
            assert!(pages <= made.len(), "the pages go on for ever");
        }
        let mut sorted = made.clone();
        sorted.sort();
        assert_eq!(seen, sorted, "every group once, by id ({per_page} a page)");
        assert_eq!(pages, made.len().div_ceil(per_page), "no empty last page");
    }
}

#[tokio::test]
async fn operators_pause_and_resume_a_group_audited_and_viewers_may_not() {
    let events = audit_log();
    let redis = TestRedis::new("dash-groups-act");
    let gate = Arc::new(Gate(Semaphore::new(0)));
    let app = grouped_app(&redis, "dg-act", gate).await;
    let q = app.queue::<serde_json::Value>("dg-act").unwrap();
    for id in ["g-1", "g-2", "g-3"] {
        q.set_group_limits(id, GroupLimits::new().concurrency(1))
            .await
            .unwrap();
    }
    let addr = serve(&app).await;
    let groups = "/admin/queues/dg-act/groups";

    // A viewer sees the group and no button, and a POST of its own is refused.
    let refused = post(addr, &format!("{groups}/pause"), "viewer", "group=g-1").await;
    assert_eq!(refused.status, 403);
    assert!(!group(&app, "dg-act", "g-1").await.paused);

    // The operator pauses from the second page of one group each, and comes back there.
    let page = text(&get(addr, &format!("{groups}?after=g-1&count=1"), "operator").await);
    let (to, body) = form(&page, "/groups/pause");
    assert_eq!(to, format!("{groups}/pause"));
    let paused = post(addr, &to, "operator", &body).await;
    assert_eq!(paused.status, 303, "{}", text(&paused));
    assert_eq!(
        paused.header("location"),
        Some(format!("{groups}?after=g-1&count=1").as_str())
    );
    assert!(group(&app, "dg-act", "g-2").await.paused);
    assert!(!group(&app, "dg-act", "g-1").await.paused);
    let page = text(&get(addr, &format!("{groups}?after=g-1&count=1"), "operator").await);
    assert_eq!(row_of(&page, "g-2")[3], "paused");
    let (to, body) = form(&page, "/groups/resume");
    let resumed = post(addr, &to, "operator", &body).await;
    assert_eq!(resumed.status, 303, "{}", text(&resumed));
    assert!(!group(&app, "dg-act", "g-2").await.paused);

    // Bad actions answer 4xx pages, and change nothing.
    for (path, form, status) in [
        (format!("{groups}/pause"), "", 400),
        (format!("{groups}/explode"), "group=g-1", 400),
        (format!("{groups}/pause"), "group=g-1&count=0", 400),
        (
            "/admin/queues/no-such/groups/pause".to_owned(),
            "group=g-1",
            404,
        ),
    ] {
        let answer = post(addr, &path, "operator", form).await;
        assert_eq!(answer.status, status, "{path} {form}: {}", text(&answer));
    }
    // The jobs without a group are no group to pause.
    let empty = post(addr, &format!("{groups}/pause"), "operator", "group=").await;
    assert!((400..500).contains(&empty.status), "{}", empty.status);
    assert!(groups_of(&app, "dg-act").await.iter().all(|g| !g.paused));

    let logged = events.lock().unwrap().clone();
    for needle in [
        "who=olga action=pause-group queue=dg-act group=g-2",
        "who=olga action=resume-group queue=dg-act group=g-2",
    ] {
        assert!(
            logged.iter().any(|l| l.contains(needle)),
            "{needle} in {logged:#?}"
        );
    }
    assert!(
        logged
            .iter()
            .any(|l| l.contains("who=victor") && l.contains("groups/pause")),
        "the viewer's refused POST is audited: {logged:#?}"
    );
}

#[tokio::test]
async fn bad_queries_get_4xx_pages() {
    let redis = TestRedis::new("dash-groups-bad");
    let gate = Arc::new(Gate(Semaphore::new(0)));
    let app = grouped_app(&redis, "dg-bad", gate).await;
    let addr = serve(&app).await;
    // Longer than any group id, even one from a Node producer (ours stop at 128 bytes).
    let long = "g".repeat(4 * 1024 + 1);
    for (path, status) in [
        ("/admin/queues/dg-bad/groups?count=0".to_owned(), 400),
        ("/admin/queues/dg-bad/groups?count=201".to_owned(), 400),
        ("/admin/queues/dg-bad/groups?count=ten".to_owned(), 400),
        (format!("/admin/queues/dg-bad/groups?after={long}"), 400),
        ("/admin/queues/no-such/groups".to_owned(), 404),
    ] {
        let page = get(addr, &path, "viewer").await;
        assert_eq!(page.status, status, "{path}: {}", text(&page));
    }
    // A queue without groups says so, and a cursor past the last group too.
    let none = text(&get(addr, "/admin/queues/dg-bad/groups", "viewer").await);
    assert!(none.contains("This queue has no groups."), "{none}");
    let past = text(&get(addr, "/admin/queues/dg-bad/groups?after=zzz", "viewer").await);
    assert!(past.contains("No more groups."), "{past}");
}

#[tokio::test]
async fn a_group_id_of_html_and_url_characters_is_escaped_and_its_buttons_work() {
    let redis = TestRedis::new("dash-groups-odd");
    let gate = Arc::new(Gate(Semaphore::new(0)));
    let app = grouped_app(&redis, "dg-odd", gate).await;
    let q = app.queue::<serde_json::Value>("dg-odd").unwrap();
    let odd = r#"<img src=x onerror="alert(1)">&a=1/../?#%2F 'é'+"#;
    q.set_group_limits(odd, GroupLimits::new().concurrency(1))
        .await
        .unwrap();
    let addr = serve(&app).await;
    let page = text(&get(addr, "/admin/queues/dg-odd/groups", "operator").await);
    assert!(!page.contains("<img"), "escaped: {page}");
    let shown = r#"&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;a=1/../?#%2F 'é'+"#;
    assert_eq!(row_of(&page, shown)[4], "1 at once");

    for (action, paused) in [("/groups/pause", true), ("/groups/resume", false)] {
        let page = text(&get(addr, "/admin/queues/dg-odd/groups", "operator").await);
        let (to, body) = form(&page, action);
        let done = post(addr, &to, "operator", &body).await;
        assert_eq!(done.status, 303, "{action}: {}", text(&done));
        assert_eq!(group(&app, "dg-odd", odd).await.paused, paused, "{action}");
    }
}

#[tokio::test]
async fn the_overview_marks_only_the_queues_with_groups() {
    let redis = TestRedis::new("dash-groups-mark");
    let gate = Arc::new(Gate(Semaphore::new(0)));
    let app = redis
        .app(|b| {
            b.provide_arc(gate)
                .processor(
                    Processor::new("dg-fair")
                        .groups(GroupLimits::new())
                        .job("hold", hold),
                )
                .processor(Processor::new("dg-plain").job("hold", hold))
        })
        .await;
    let addr = serve(&app).await;
    let overview = text(&get(addr, "/admin/queues", "viewer").await);
    assert!(!overview.contains(">grouped<"), "no groups yet: {overview}");

    let fair = app.queue::<serde_json::Value>("dg-fair").unwrap();
    fair.pause_group("t-1").await.unwrap();
    let overview = text(&get(addr, "/admin/queues", "viewer").await);
    let row = |queue: &str| {
        overview
            .split("<tr>")
            .find(|r| r.contains(&format!(">{queue}</a>")))
            .unwrap_or_else(|| panic!("no row for {queue}: {overview}"))
            .to_owned()
    };
    assert!(
        row("dg-fair")
            .contains(r#"<a class="chip" href="/admin/queues/dg-fair/groups">grouped</a>"#),
        "{overview}"
    );
    assert!(!row("dg-plain").contains("grouped"), "{overview}");
    // Every queue's page leads to its groups, which says plainly when there are none.
    let plain = text(&get(addr, "/admin/queues/dg-plain", "viewer").await);
    assert!(plain.contains("href=\"/admin/queues/dg-plain/groups\""));
    let none = text(&get(addr, "/admin/queues/dg-plain/groups", "viewer").await);
    assert!(none.contains("This queue has no groups."), "{none}");
}

#[test]
fn the_helpers_read_a_form_as_a_browser_sends_it() {
    let page = r#"<form class="inline" method="post" action="/q/groups/pause"><input type="hidden" name="group" value="a&amp;b &quot;c&quot;"><input type="hidden" name="after" value="x"><button>Pause</button></form>"#;
    let (to, body) = form(page, "/groups/pause");
    assert_eq!(to, "/q/groups/pause");
    assert_eq!(body, "group=a%26b%20%22c%22&after=x");
    let seen: HashSet<_> = rows("<tbody><tr><td>a</td><td class=\"n\"><b>1</b></td></tr></tbody>")
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(seen, HashSet::from(["a".to_owned(), "1".to_owned()]));
}
