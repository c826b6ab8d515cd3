//! The `Config` cells: an option a primitive has no use for is refused at the acquire, and
//! by the start-up check of an attribute.

use super::*;

/// The `Config` cells: refused at the acquire, and by the start-up check of an attribute.
pub(crate) async fn refused(opt: Opt, prim: Prim) {
    let w = world();
    match (opt, prim) {
        (Opt::fair, Prim::read) => {
            let fair = Opts {
                fair: true,
                ..Opts::default()
            };
            for via in [Via::Api, Via::Attribute] {
                let case = format!("a fair read via {via:?}");
                assert_config(
                    take(&w.a, prim, &fair, via).await,
                    "fair read locks are not offered",
                    &case,
                );
            }
            let spec = fair.spec(LeaseKind::Read);
            assert_config(
                __private::check(&w.a, &spec),
                "fair read locks are not offered",
                "the start-up check",
            );
        }
        (Opt::unfenced, Prim::read) => {
            let unfenced = Opts {
                unfenced: true,
                ..Opts::default()
            };
            for via in [Via::Api, Via::Attribute] {
                let case = format!("an unfenced read via {via:?}");
                assert_config(
                    take(&w.a, prim, &unfenced, via).await,
                    "unfenced reads are not offered",
                    &case,
                );
            }
        }
        (Opt::unfenced, Prim::downgrade) => {
            let unfenced = Opts {
                unfenced: true,
                ..Opts::default()
            };
            for via in [Via::Api, Via::Attribute] {
                let case = format!("a downgrade of an unfenced write via {via:?}");
                let write = take_one(&w.a, Prim::write, &unfenced, via).await.unwrap();
                let a = w.a.clone();
                let (read, unfenced_read) = write
                    .scope(async move {
                        (
                            take_one(&a, Prim::read, &Opts::default(), via).await,
                            a.read_lock(KEY).unfenced().try_acquire().await,
                        )
                    })
                    .await;
                assert_config(read, "inside an unfenced write", &case);
                assert_config(unfenced_read, "unfenced reads are not offered", &case);
                write.release().await.unwrap();
            }
        }
        other => unreachable!("{other:?} is not a Config cell"),
    }
}
