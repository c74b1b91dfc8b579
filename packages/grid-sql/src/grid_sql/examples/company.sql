-- The example schema of GRID's demo: a small company. `salaries` holds what a
-- restricted role must not see.
CREATE TABLE departments (id INTEGER PRIMARY KEY, name TEXT NOT NULL, budget INTEGER);
CREATE TABLE employees (id INTEGER PRIMARY KEY, name TEXT NOT NULL, dept_id INTEGER REFERENCES departments(id), hired TEXT);
CREATE TABLE salaries (employee_id INTEGER REFERENCES employees(id), amount INTEGER, since TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, employee_id INTEGER REFERENCES employees(id), total REAL, placed TEXT);
INSERT INTO departments VALUES (1, 'Research', 900000), (2, 'Sales', 400000), (3, 'Support', 250000);
INSERT INTO employees VALUES (1, 'Ada', 1, '2021-03-01'), (2, 'Grace', 1, '2019-07-15'), (3, 'Linus', 2, '2022-01-10'), (4, 'Barbara', 3, '2020-11-30');
INSERT INTO salaries VALUES (1, 182000, '2024-01-01'), (2, 195000, '2023-06-01'), (3, 98000, '2024-03-01'), (4, 87000, '2022-09-01');
INSERT INTO orders VALUES (1, 3, 1200.5, '2024-05-02'), (2, 3, 310.0, '2024-05-09'), (3, 4, 75.25, '2024-06-11');
