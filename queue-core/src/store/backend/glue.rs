//! The Rust around each database's statements, written once for both (see `mod.rs`).

/// The statements that are the same Rust for both databases, given that database's
/// SQL module (`sql::CLAIM`, ...) and how it binds a list of ids.
macro_rules! glue {
    () => {
        // `ClaimedRow` is crate-private; the trait is sealed, so no one outside sees it.
        #[allow(private_interfaces)]
        fn outbox_claim<'c>(
            conn: &'c mut Self::Connection,
            owner: &'c str,
            lease_ms: i64,
            limit: i64,
        ) -> BoxFuture<'c, sqlx::Result<Vec<ClaimedRow>>> {
            Box::pin(async move {
                let rows: Vec<ClaimedTuple> = sqlx::query_as(sql::CLAIM)
                    .bind(owner)
                    .bind(lease_ms)
                    .bind(limit)
                    .fetch_all(conn)
                    .await?;
                let mut rows: Vec<ClaimedRow> = rows.into_iter().map(ClaimedRow::from).collect();
                rows.sort_unstable_by_key(|row| row.id);
                Ok(rows)
            })
        }

        fn outbox_delete<'a>(
            pool: &'a Pool<Self>,
            ids: &'a [i64],
        ) -> BoxFuture<'a, sqlx::Result<()>> {
            Box::pin(async move {
                sqlx::query(sql::DELETE)
                    .bind(id_list(ids))
                    .execute(pool)
                    .await?;
                Ok(())
            })
        }

        fn outbox_release<'a>(
            pool: &'a Pool<Self>,
            ids: &'a [i64],
            owner: &'a str,
        ) -> BoxFuture<'a, sqlx::Result<()>> {
            Box::pin(async move {
                sqlx::query(sql::RELEASE)
                    .bind(owner)
                    .bind(id_list(ids))
                    .execute(pool)
                    .await?;
                Ok(())
            })
        }

        fn outbox_set_aside<'a>(
            pool: &'a Pool<Self>,
            id: i64,
            error: &'a str,
        ) -> BoxFuture<'a, sqlx::Result<()>> {
            Box::pin(async move {
                sqlx::query(sql::SET_ASIDE)
                    .bind(id)
                    .bind(error)
                    .execute(pool)
                    .await?;
                Ok(())
            })
        }

        fn outbox_retry_later<'a>(
            pool: &'a Pool<Self>,
            id: i64,
            owner: &'a str,
            error: &'a str,
            after_ms: i64,
        ) -> BoxFuture<'a, sqlx::Result<()>> {
            Box::pin(async move {
                sqlx::query(sql::RETRY_LATER)
                    .bind(id)
                    .bind(owner)
                    .bind(error)
                    .bind(after_ms)
                    .execute(pool)
                    .await?;
                Ok(())
            })
        }

        fn outbox_requeue(pool: &Pool<Self>, id: i64) -> BoxFuture<'_, sqlx::Result<bool>> {
            Box::pin(async move {
                let done = sqlx::query(sql::REQUEUE).bind(id).execute(pool).await?;
                Ok(done.rows_affected() == 1)
            })
        }

        fn outbox_find<'a>(
            pool: &'a Pool<Self>,
            queue: &'a str,
            job_id: &'a str,
        ) -> BoxFuture<'a, sqlx::Result<Option<ListedRow>>> {
            Box::pin(async move {
                sqlx::query_as(sql::FIND)
                    .bind(queue)
                    .bind(job_id)
                    .fetch_optional(pool)
                    .await
            })
        }

        fn outbox_list(
            pool: &Pool<Self>,
            failed: bool,
            limit: i64,
        ) -> BoxFuture<'_, sqlx::Result<Vec<ListedRow>>> {
            Box::pin(async move {
                let query = if failed {
                    sql::LIST_FAILED
                } else {
                    sql::LIST_PENDING
                };
                sqlx::query_as(query).bind(limit).fetch_all(pool).await
            })
        }

        fn outbox_counts(
            pool: &Pool<Self>,
        ) -> BoxFuture<'_, sqlx::Result<(i64, i64, Option<i64>)>> {
            Box::pin(async move { sqlx::query_as(sql::COUNTS).fetch_one(pool).await })
        }

        fn operation_claim<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
        ) -> BoxFuture<'c, sqlx::Result<bool>> {
            Box::pin(async move {
                let claimed: Option<String> = sqlx::query_scalar(sql::OPERATION_CLAIM)
                    .bind(key)
                    .fetch_optional(conn)
                    .await?;
                Ok(claimed.is_some())
            })
        }

        fn operation_store<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
            result: &'c str,
        ) -> BoxFuture<'c, sqlx::Result<()>> {
            Box::pin(async move {
                sqlx::query(sql::OPERATION_STORE)
                    .bind(key)
                    .bind(result)
                    .execute(conn)
                    .await?;
                Ok(())
            })
        }

        fn operation_read<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
        ) -> BoxFuture<'c, sqlx::Result<Option<Option<String>>>> {
            Box::pin(async move {
                sqlx::query_scalar(sql::OPERATION_READ)
                    .bind(key)
                    .fetch_optional(conn)
                    .await
            })
        }

        fn stage_claim<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
            stage: &'c str,
            position: i32,
        ) -> BoxFuture<'c, sqlx::Result<bool>> {
            Box::pin(async move {
                let claimed: Option<String> = sqlx::query_scalar(sql::STAGE_CLAIM)
                    .bind(key)
                    .bind(stage)
                    .bind(position)
                    .fetch_optional(conn)
                    .await?;
                Ok(claimed.is_some())
            })
        }

        fn stage_store<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
            stage: &'c str,
            result: &'c str,
        ) -> BoxFuture<'c, sqlx::Result<()>> {
            Box::pin(async move {
                sqlx::query(sql::STAGE_STORE)
                    .bind(key)
                    .bind(stage)
                    .bind(result)
                    .execute(conn)
                    .await?;
                Ok(())
            })
        }

        fn stage_list<'c>(
            conn: &'c mut Self::Connection,
            key: &'c str,
        ) -> BoxFuture<'c, sqlx::Result<Vec<StageRow>>> {
            Box::pin(async move {
                sqlx::query_as(sql::STAGE_LIST)
                    .bind(key)
                    .fetch_all(conn)
                    .await
            })
        }
    };
}
pub(super) use glue;
