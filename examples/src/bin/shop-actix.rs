//! The shop on actix-web: `shop-actix [--port 8080] [--redis-url URL] [--store-url URL]
//! [--zookeeper HOSTS] [--etcd ENDPOINTS] [--postgres URL] [--no-lock] [--lock-wait 30s]`. The handlers are in `src/actix_shop.rs`.

fn main() -> std::io::Result<()> {
    let args = leasehold_examples::shop::ShopArgs::from_env("shop-actix");
    leasehold_examples::actix_shop::serve(args)
}
