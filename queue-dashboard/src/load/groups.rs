//! A groups page's data: one script that reads the page and one group more (whether a
//! next page exists), whatever the number of groups.

use queue_core::group::GroupInfo;
use queue_core::Queue;

use crate::query::Cursor;

/// One page of a queue's groups.
pub(crate) struct GroupsPage {
    pub(crate) groups: Vec<GroupInfo>,
    /// The group the next page starts after; `None` on the last page.
    pub(crate) next: Option<String>,
}

/// Reads the page of `queue`'s groups `cursor` points at.
pub(crate) async fn read(
    queue: &Queue<serde_json::Value>,
    cursor: &Cursor,
) -> Result<GroupsPage, queue_core::Error> {
    // One more than shown: whether a next page exists, without a link to an empty one.
    let mut groups = queue
        .groups(cursor.after.as_deref(), cursor.count + 1)
        .await?
        .groups;
    let next = if groups.len() > cursor.count {
        groups.truncate(cursor.count);
        groups.last().map(|g| g.id.clone())
    } else {
        None
    };
    Ok(GroupsPage { groups, next })
}
