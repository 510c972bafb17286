-- The testbed shop's data (infra/testbed/up.sh runs it with psql -v products=N -v categories=C).
--
-- The request classes' database cost is the number of rows whose description is compared with
-- pg_trgm's similarity() (about 10-20 us a row on this 2-core host), so it depends on the data:
--   home     the 180 products after a random id              (a few ms)
--   product  one product, its order count, and the 300 products around it as "related"
--   search   every product of a random category, ranked by similarity; the categories' sizes
--            fall as 1/rank (Zipf), so with the category drawn uniformly the search's cost is
--            heavy-tailed: P(cost > x) ~ 1/x up to the largest category
--   buy      one order row written, the buyer's order total, 120 products as "recommended"
-- Every statement the app sends starts with /* class=NAME */, which pg_stat_statements keeps in
-- its query text: the server's own time per class (bench/testbed/truth.py).

CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;

CREATE TABLE categories (id int PRIMARY KEY, name text NOT NULL, size int NOT NULL);
INSERT INTO categories
SELECT c, 'category-' || c,
       greatest(1, round(:products / (c * h.h)))::int
FROM generate_series(1, :categories) c,
     (SELECT sum(1.0 / k) AS h FROM generate_series(1, :categories) k) h;

CREATE TABLE products (
    id serial PRIMARY KEY,
    category int NOT NULL REFERENCES categories(id),
    name text NOT NULL,
    price numeric(10, 2) NOT NULL,
    stock int NOT NULL,
    description text NOT NULL
);
-- rows in random category order, so a category's rows are spread over the table (a search reads
-- them through the index, as a real catalogue's would be)
INSERT INTO products (category, name, price, stock, description)
SELECT c.id, 'product-' || md5(random()::text), round((1 + random() * 99)::numeric, 2), 1000,
       md5(random()::text) || ' ' || md5(random()::text) || ' ' || md5(random()::text) || ' '
       || md5(random()::text)
FROM categories c, generate_series(1, c.size) g
ORDER BY random();
CREATE INDEX products_category ON products (category);

CREATE TABLE orders (
    id bigserial PRIMARY KEY,
    product_id int NOT NULL,
    customer int NOT NULL,
    qty int NOT NULL,
    price numeric(10, 2) NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO orders (product_id, customer, qty, price)
SELECT 1 + floor(random() * (SELECT count(*) FROM products))::int, 1 + floor(random() * 1000)::int,
       1 + floor(random() * 3)::int, round((1 + random() * 99)::numeric, 2)
FROM generate_series(1, 50000);
CREATE INDEX orders_product ON orders (product_id);
CREATE INDEX orders_customer ON orders (customer);

VACUUM ANALYZE;
