//! The shop on axum: `shop-axum [--port 8080] [--redis-url URL] [--store-url URL]
//! [--zookeeper HOSTS] [--etcd ENDPOINTS] [--postgres URL] [--no-lock] [--lock-wait 30s]`. The handlers are in `src/axum_shop.rs`.

fn main() -> std::io::Result<()> {
    let args = leasehold_examples::shop::ShopArgs::from_env("shop-axum");
    leasehold_examples::axum_shop::serve(args)
}
