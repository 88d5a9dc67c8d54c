//! Operating a queue's groups: pause and resume one, give one its own limits, list
//! them a page at a time.

use super::Queue;
use crate::error::Error;
use crate::group::{GroupLimits, GroupPage, MAX_GROUP_PAGE};
use crate::options::validate_group;

impl<T> Queue<T> {
    /// Pauses one group: its waiting jobs stay, none of them starts until
    /// [`resume_group`](Self::resume_group), and its running jobs finish. Other groups
    /// run on.
    pub async fn pause_group(&self, group: &str) -> Result<(), Error> {
        validate_group(group)?;
        self.timed("pause_group", async {
            self.engine().await?.pause_group(group).await
        })
        .await?;
        tracing::info!(queue = %self.name(), group, "group paused");
        Ok(())
    }

    /// Lets a paused group start jobs again, at once: an idle worker is woken, as by an
    /// add.
    pub async fn resume_group(&self, group: &str) -> Result<(), Error> {
        validate_group(group)?;
        self.timed("resume_group", async {
            self.engine().await?.resume_group(group).await
        })
        .await?;
        tracing::info!(queue = %self.name(), group, "group resumed");
        Ok(())
    }

    /// Gives one group its own limits, over the queue's
    /// ([`Processor::groups`](crate::Processor::groups)); a limit left unset goes back
    /// to the queue's. Held in Redis: every worker applies it from its next take, and a
    /// group that waited at its old limits gets a turn at once (an idle worker is woken).
    pub async fn set_group_limits(&self, group: &str, limits: GroupLimits) -> Result<(), Error> {
        validate_group(group)?;
        limits.validate()?;
        self.timed("set_group_limits", async {
            self.engine().await?.set_group_limits(group, limits).await
        })
        .await
    }

    /// One page of the queue's groups (those with jobs waiting or running, or
    /// settings of their own), ordered by id, with their waiting and active counts:
    /// at most `count` (up to [`MAX_GROUP_PAGE`]) after `after` (from the first when
    /// `None`; give the previous page's [`next`](GroupPage::next)).
    pub async fn groups(&self, after: Option<&str>, count: usize) -> Result<GroupPage, Error> {
        if count == 0 || count > MAX_GROUP_PAGE {
            return Err(Error::invalid(
                "count",
                format!("must be 1 to {MAX_GROUP_PAGE}"),
            ));
        }
        let groups = self
            .timed("groups", async {
                self.engine().await?.groups(after, count).await
            })
            .await?;
        let next = (groups.len() == count)
            .then(|| groups.last().map(|g| g.id.clone()))
            .flatten();
        Ok(GroupPage { groups, next })
    }
}
