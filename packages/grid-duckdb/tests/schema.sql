CREATE TABLE departments (id integer PRIMARY KEY, name text NOT NULL, location text,
  budget numeric(12,2), parent_id integer REFERENCES departments(id));
CREATE TABLE employees (id integer PRIMARY KEY, first_name text NOT NULL,
  last_name text NOT NULL, email text UNIQUE, department_id integer REFERENCES departments(id),
  manager_id integer REFERENCES employees(id), hire_date date, salary numeric(10,2),
  title text, is_active boolean DEFAULT true);
CREATE TABLE salaries (employee_id integer REFERENCES employees(id),
  amount numeric(10,2) NOT NULL, from_date date NOT NULL, to_date date,
  PRIMARY KEY (employee_id, from_date));
CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL, email text UNIQUE,
  city text, country text, created_at timestamptz DEFAULT now());
CREATE TABLE products (id integer PRIMARY KEY, name text UNIQUE NOT NULL, category text,
  price numeric(10,2), stock integer DEFAULT 0);
CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer REFERENCES customers(id),
  employee_id integer REFERENCES employees(id), order_date date, status text DEFAULT 'new',
  total numeric(12,2), shipped_at timestamp);
CREATE TABLE order_items (order_id integer REFERENCES orders(id),
  product_id integer REFERENCES products(id), quantity integer NOT NULL,
  unit_price numeric(10,2), discount numeric(4,2) DEFAULT 0,
  PRIMARY KEY (order_id, product_id));
CREATE TABLE attendance (employee_id integer REFERENCES employees(id), date date NOT NULL,
  hours numeric(4,1), PRIMARY KEY (employee_id, date));
CREATE TABLE projects (id integer PRIMARY KEY, name text NOT NULL,
  department_id integer REFERENCES departments(id), start_date date, end_date date,
  budget numeric(12,2));
CREATE TABLE employee_projects (employee_id integer REFERENCES employees(id),
  project_id integer REFERENCES projects(id), role text, PRIMARY KEY (employee_id, project_id));
